"""The training loop: the Trainer, one optimizer update (step.py), what the loop tells callbacks (hooks.py), the callbacks, evaluation passes and a sweep trial's link to its study."""
