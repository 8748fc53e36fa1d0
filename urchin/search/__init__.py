"""Search views over the journal: tokenisation and the token-cosine index (more to come)."""
