"""Model access: references and their identity, the Hub, the built-in GGUF, loading, architecture
lookups, single tensors read without loading a model."""
