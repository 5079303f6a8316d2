"""Where results live: the disk cache, the shared result store, the project's folders."""
