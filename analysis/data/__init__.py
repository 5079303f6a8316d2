"""Text and labelled data: corpora, tokenisation and the seeded token sample."""
