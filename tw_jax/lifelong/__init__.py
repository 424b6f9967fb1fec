"""The lifelong runner (``tw-jax lifelong``): it trains each monthly update and evaluates it, so
it stands above both ``tw_jax.train`` and ``tw_jax.evaluate``; who trains an update (tw_jax's
trainer or the real T5X) is an :class:`~tw_jax.lifelong.updates.UpdateTrainer`."""
