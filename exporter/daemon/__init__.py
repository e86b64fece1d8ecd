"""The node daemon (`gdx serve`): its options, HTTP server, exposition, collectors and the probe receiver."""
