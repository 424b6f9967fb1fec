"""SeqIO task and mixture registrations (installed as ``tw_jax.tasks``).

Importing this module registers every task; see the tasks issue. Nothing is registered yet.
"""
