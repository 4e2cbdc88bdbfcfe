"""Import kafka-python (an oracle) once with its own DeprecationWarnings silenced: it loads its
JSON specs through deprecated `importlib.resources` calls at import time."""

import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka  # noqa: F401
    import kafka.errors  # noqa: F401
