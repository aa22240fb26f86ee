"""ACL authorization as Kafka's (issue 20): ``model`` (patterns, entries, filters),
``authorizer`` (the decision, indexed), ``store`` (where ACLs are kept: a file on one node)."""
