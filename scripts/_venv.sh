# Shared by scripts/serve and scripts/test: make ./.venv with a working pip.
# Debian's python3 lacks ensurepip unless python3-venv is installed, so install it first.
VENV=${STROM_VENV:-$PWD/.venv}

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

apt_install() {
    # apt_install PKG...: install the Debian packages that are missing (apt-get update first).
    local missing=()
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    command -v apt-get >/dev/null || { echo "need Debian packages: ${missing[*]}" >&2; return 1; }
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}" >/dev/null
}

ensure_venv() {
    if [ ! -x "$VENV/bin/python" ]; then
        if ! python3 -m venv "$VENV" 2>/dev/null; then
            rm -rf "$VENV"
            pyver=$(python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
            apt_install "python3-venv" || apt_install "python${pyver}-venv"
            python3 -m venv "$VENV"
        fi
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
    fi
}
