"""Model discovery: tree search over candidate programs, proposers, sandbox and scoring."""
