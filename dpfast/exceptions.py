"""Exceptions and warnings raised by dpfast.

Every error dpfast raises about its caller's input or environment derives from
:class:`DPFastError`, and from the built-in class of its kind (``ValueError`` for a bad
value, ``TypeError`` for a wrong type, ...), so that an embedding tool can catch all of
them in one clause and a caller can keep catching ``ValueError``. Two exceptions are
Python's own protocol: ``AttributeError`` on an immutable object, and ``AssertionError``
for a broken internal invariant (a bug in dpfast).
"""

from __future__ import annotations


class DPFastError(Exception):
    """Base class of dpfast's own errors."""


class DPFastValueError(DPFastError, ValueError):
    """A bad value: an argument, a column's contents, a file's; the message says how to fix it."""


class DPFastTypeError(DPFastError, TypeError):
    """A value of the wrong type; the message says which type was expected."""


class DPFastKeyError(DPFastError, KeyError):
    """A name that is not there (a schema's column, a metric, a cut's column)."""


class DPFastIndexError(DPFastError, IndexError):
    """An index out of range (a taxonomy's node)."""


class DPFastOSError(DPFastError, OSError):
    """A file or system facility that does not work as a release needs."""


class DPFastImportError(DPFastError, ImportError):
    """An optional dependency that is not installed; the message says how to install it."""


class DPFastRuntimeError(DPFastError, RuntimeError):
    """A cluster's workers did not do what a release asked (nothing was published)."""


class BudgetExceededError(DPFastError, ValueError):
    """A step would spend more privacy budget than the ledger or the budget file has left."""


class BudgetFileError(DPFastError, ValueError):
    """A budget file that cannot be used as asked (:mod:`dpfast.budget`).

    It is missing or not a budget file, or an entry cannot change as asked: a committed
    spend is never cleared, a running release's reservation only with ``force``.
    """


class EpsilonRangeError(DPFastError, ValueError):
    """A privacy budget that no exact sampler can serve for this input.

    The message names the parameter, the column or step concerned, and the usable range.
    ``template`` holds ``{parameter}`` where the parameter's name goes; the command line
    shows the message with its flag instead (:meth:`for_parameter`).
    """

    def __init__(self, template: str, parameter: str = "epsilon") -> None:
        self.template = template
        super().__init__(self.for_parameter(parameter))

    def for_parameter(self, parameter: str) -> str:
        """Return the message with ``parameter`` (e.g. ``"--epsilon"``) as the name."""
        return self.template.replace("{parameter}", parameter)


class PrivacyLeakWarning(UserWarning):
    """A parameter was derived from the data, so the release is not differentially private."""


class UnsafeSamplerWarning(UserWarning):
    """A sampler that is not safe for publication (floating-point leakage) was selected."""


class UnprovenReleaseWarning(PrivacyLeakWarning):
    """A release mode that no proof covers was chosen; its report says it is not proven DP."""


class NoiseDominatesWarning(UserWarning):
    """The release's forecast puts 10 % or more of a column's values on a bound.

    Decided before any ε is reserved, from public values only (the method's noise scales,
    the bounds, the row count): one warning per release, naming every such column
    (docs/forecast.md#warning).
    """


class TransformBiasWarning(UserWarning):
    """A transformed column's noise is too wide for its mapping back to be corrected.

    The noise ``Y`` of a column released with ``transform`` ``"log"`` or ``"asinh"`` is
    added on the transformed scale; the mapping back divides out its mean factor
    ``E[e^Y]``, which is infinite once the noise scale reaches 1 there. The release then
    maps back uncorrected, and its values are biased upwards in size (the report's
    ``transforms`` parameter and ``warnings`` say so; docs/privacy.md#transforms).
    """


class IndexDroppedWarning(UserWarning):
    """A release in a new row order dropped the input's pandas index (it would show the order).

    Keep the labels as a column with ``frame.reset_index()`` before the release; that
    column is then unprotected, released as the method's ``unprotected`` argument says.
    """


def interrupt_in(exc: BaseException) -> KeyboardInterrupt | None:
    """Return the ``KeyboardInterrupt`` that ``exc`` was raised in handling, if any.

    Ctrl-C while pyspark collects a job's results raises ``KeyboardInterrupt`` (pyspark's
    SIGINT handler cancels the jobs first), but pyspark then asks the JVM for the job's
    result, which raises the job's cancellation in its place, with the interrupt as its
    context: the caller must still see an interrupt.
    """
    found: list[BaseException] = [exc]
    seen: set[int] = set()
    while found:
        error = found.pop()
        if id(error) in seen:
            continue
        seen.add(id(error))
        if isinstance(error, KeyboardInterrupt):
            return error
        found += [e for e in (error.__cause__, error.__context__) if e is not None]
    return None
