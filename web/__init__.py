"""The web layer: FastAPI app factory, routers and the ``pdlab`` command."""
