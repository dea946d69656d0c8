"""The evaluator plugin protocol's generated code (``v1alpha1``, from proto/evalsi/plugin); the SDK and host are
``evalsi.plugins``."""
