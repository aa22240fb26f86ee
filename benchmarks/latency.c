/* Paced produce-latency load generator for benchmarks/broker.py.
 *
 *   latency BOOTSTRAP TOPIC RATE SECONDS
 *
 * Produces 100-byte records to partition 0 at RATE records/s (paced in 1 ms ticks,
 * acks=all, linger.ms=0) for SECONDS, then prints "p50_ms p99_ms acked" from
 * librdkafka's own per-message latency (rd_kafka_message_latency: produce() to the
 * broker's acknowledgement). In C because a Python generator cannot pace the rates the
 * broker goal asks for (half of Strom's peak) on a 2-core machine.
 */
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double *latencies;
static long acked, capacity;

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque) {
    (void)rk; (void)opaque;
    if (msg->err == 0 && acked < capacity)
        latencies[acked++] = rd_kafka_message_latency(msg) / 1000.0; /* us -> ms */
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s BOOTSTRAP TOPIC RATE SECONDS\n", argv[0]);
        return 2;
    }
    long rate = atol(argv[3]);
    double seconds = atof(argv[4]);
    long per_tick = rate / 1000 > 0 ? rate / 1000 : 1;
    long ticks = (long)(seconds * 1000);
    capacity = per_tick * ticks;
    latencies = calloc((size_t)capacity, sizeof(double));
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    const char *settings[][2] = {
        {"bootstrap.servers", argv[1]}, {"linger.ms", "0"}, {"acks", "all"},
        {"queue.buffering.max.messages", "2000000"}, {"message.timeout.ms", "30000"},
    };
    for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++) {
        if (rd_kafka_conf_set(conf, settings[i][0], settings[i][1], err, sizeof err) != RD_KAFKA_CONF_OK) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
    }
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (rk == NULL) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    char value[100];
    memset(value, 'y', sizeof value);
    double start = now_s();
    for (long tick = 0; tick < ticks; tick++) {
        for (long i = 0; i < per_tick; i++) {
            while (rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(argv[2]), RD_KAFKA_V_PARTITION(0),
                                     RD_KAFKA_V_VALUE(value, sizeof value),
                                     RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END)
                   == RD_KAFKA_RESP_ERR__QUEUE_FULL)
                rd_kafka_poll(rk, 1);
        }
        rd_kafka_poll(rk, 0);
        double pause = start + (tick + 1) / 1000.0 - now_s();
        if (pause > 0) {
            struct timespec ts = {0, (long)(pause * 1e9)};
            nanosleep(&ts, NULL);
        }
    }
    rd_kafka_flush(rk, 30000);
    rd_kafka_destroy(rk);
    if (acked < capacity / 2) {
        printf("nan nan %ld\n", acked);
        return 0;
    }
    qsort(latencies, (size_t)acked, sizeof(double), compare);
    printf("%.3f %.3f %ld\n", latencies[acked / 2], latencies[(long)(acked * 0.99)], acked);
    return 0;
}
