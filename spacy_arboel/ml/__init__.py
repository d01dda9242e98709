"""thinc architectures that wrap the PyTorch encoders."""
