"""What a loaded model computes on text: hidden states of every layer, pooled states, held-out loss."""
