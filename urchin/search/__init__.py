"""Views over the journal used to answer queries: substring, token-cosine, embedder vectors."""
