"""The small collaborators :class:`speechkit.Brain` delegates to: precision, optimization steps, loaders,
progress and stage statistics. Each module has one job and can be used and tested on its own."""
