"""stable-harness: a Hydra-configured PyTorch training harness built for stable runs."""
