"""Typed fusion: one model per method, each owning its parameters.

A request names the fusion either by method (``"fusion": "rrf"``, with the method's
knobs as top-level fields, as before) or as an object of the method's own model
(``"fusion": {"method": "rrf", "k": 30, "lexicalWeight": 0.7}``) — a discriminated
union on ``method``:

==============  ===========================================  ============================
method          object knobs                                 top-level request knobs
==============  ===========================================  ============================
``rrf``         ``k``, ``lexicalWeight`` (0..1 or ``auto``)  ``rrfK``, ``lexicalWeight``
``weighted``    ``vectorWeight``, ``lexicalWeight``,         ``threshold``
                ``threshold``
``minmax``      ``denseWeight``                              —
``dbsf``        ``denseWeight``                              —
``adaptive``    ``denseWeight`` (the base), ``languagePrior``  ``languagePrior``
==============  ===========================================  ============================

An object without a ``method`` (``{"denseWeight": 0.8}``, what ``plait search
--dense-weight 0.8`` sends) holds knobs for the method the search uses anyway: the
collection's saved one, else ``adaptive`` (:class:`SavedMethodFusion`, resolved per
collection when the search is planned).

A knob that does not apply to the method a search uses (the request's, else the
collection's saved method, else ``adaptive``) is a :class:`~plait.errors.ValidationError`
naming the method and the knobs it takes — never accepted, echoed and ignored.
``overfetch`` applies to every method.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, StrictBool, model_validator
from pydantic import ValidationError as PydanticValidationError

from plait.errors import ValidationError
from plait.retrieval.numbers import plain_number
from plait.types import FusionDecision, FusionMethod, FusionSettings, LexicalWeightMode, Model

__all__ = [
    "CHOICES",
    "CLI_FLAGS",
    "REQUEST_KNOBS",
    "AdaptiveFusion",
    "DbsfFusion",
    "FusionChoice",
    "MinmaxFusion",
    "RrfFusion",
    "SavedMethodFusion",
    "WeightedFusion",
    "decision",
    "first_error",
    "knob_error",
]

Weight = Annotated[float, Field(ge=0.0, le=1.0)]

#: The top-level request knobs each method takes (camelCase, as on the wire).
REQUEST_KNOBS: dict[FusionMethod, tuple[str, ...]] = {
    FusionMethod.RRF: ("rrfK", "lexicalWeight"),
    FusionMethod.WEIGHTED: ("threshold",),
    FusionMethod.MINMAX: (),
    FusionMethod.DBSF: (),
    FusionMethod.ADAPTIVE: ("languagePrior",),
}


def knob_error(
    method: FusionMethod | str, given: list[str], takes: tuple[str, ...], *, where: str = "", in_object: bool = False
) -> str:
    """Why the knobs ``given`` do not fit ``method``, which takes ``takes``: top-level request
    knobs, or (``in_object``) the keys of a fusion object. ``overfetch`` is no fusion knob:
    every method takes it, as a request field beside ``fusion`` (``--overfetch`` on the
    CLI), never inside a fusion object.

    >>> knob_error(FusionMethod.ADAPTIVE, ["lexicalWeight"], ("languagePrior",))
    "lexicalWeight does not apply to fusion 'adaptive': it takes languagePrior; overfetch applies to every method"
    >>> knob_error(FusionMethod.RRF, ["overfetch"], ("k", "lexicalWeight"), where=" (fusion object)", in_object=True)
    "overfetch does not apply to fusion 'rrf' (fusion object): it takes k, lexicalWeight; overfetch goes beside fusion, not inside it"
    """
    value = method.value if isinstance(method, FusionMethod) else method
    names = ", ".join(given)
    verb = "does" if len(given) == 1 else "do"
    knobs = ", ".join(takes) if takes else "no knobs"
    text = f"{names} {verb} not apply to fusion {value!r}{where}: it takes {knobs}"
    if not in_object:
        return f"{text}; overfetch applies to every method"
    return f"{text}; overfetch goes beside fusion, not inside it" if "overfetch" in given else text


def first_error(exc: PydanticValidationError) -> str:
    """The first of pydantic's errors in one line: ``denseWeight: Input should be …``."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    message = str(first["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


class _Knobs(Model):
    """Fusion knobs: a number is a JSON number (``true`` is not 1, NaN not a weight)."""

    KNOBS: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def _unknown(cls, data: Mapping[Any, Any]) -> list[str]:
        """The keys of ``data`` that are neither ``method`` nor one of :attr:`KNOBS` or the fields."""
        allowed = {"method", *cls.KNOBS, *(cls.model_fields)}
        return [str(key) for key in data if key not in allowed]

    @model_validator(mode="before")
    @classmethod
    def _plain_numbers(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            for key, value in data.items():
                if key not in ("method", "languagePrior", "language_prior"):
                    try:
                        plain_number(value)
                    except ValueError as exc:
                        raise ValueError(f"{key}: {exc}") from None
        return data


class _Choice(_Knobs):
    """One method's parameters; unknown knobs are refused naming the method's own."""

    @model_validator(mode="before")
    @classmethod
    def _own_knobs(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and (unknown := cls._unknown(data)):
            method = cls.model_fields["method"].default
            raise ValueError(knob_error(method, unknown, cls.KNOBS, where=" (fusion object)", in_object=True))
        return data

    def apply(self, settings: FusionSettings) -> FusionSettings:  # pragma: no cover - abstract
        raise NotImplementedError

    def _update(self, settings: FusionSettings, method: FusionMethod, **values: Any) -> FusionSettings:
        update: dict[str, Any] = {"method": method}
        update.update({name: value for name, value in values.items() if value is not None})
        return settings.model_copy(update=update)


class RrfFusion(_Choice):
    """Reciprocal Rank Fusion: ``Σ w_arm / (k + rank)``; ``lexicalWeight`` tilts the arms."""

    KNOBS: ClassVar[tuple[str, ...]] = ("k", "lexicalWeight")
    method: Literal["rrf"] = "rrf"
    k: int | None = Field(default=None, ge=1, le=10_000)
    lexical_weight: Weight | Literal["auto"] | None = None

    def apply(self, settings: FusionSettings) -> FusionSettings:
        out = self._update(settings, FusionMethod.RRF, rrf_k=self.k)
        if self.lexical_weight == "auto":
            return out.model_copy(update={"lexical_weight_mode": LexicalWeightMode.AUTO})
        if self.lexical_weight is not None:
            return out.model_copy(
                update={"lexical_weight": self.lexical_weight, "lexical_weight_mode": LexicalWeightMode.FIXED}
            )
        return out


class WeightedFusion(_Choice):
    """ADR 0080's weighted sum ``vectorWeight · cosine + lexicalWeight · BM25/best``, cut at ``threshold``."""

    KNOBS: ClassVar[tuple[str, ...]] = ("vectorWeight", "lexicalWeight", "threshold")
    method: Literal["weighted"] = "weighted"
    vector_weight: Weight | None = None
    lexical_weight: Weight | None = None
    threshold: Weight | None = None

    def apply(self, settings: FusionSettings) -> FusionSettings:
        return self._update(
            settings,
            FusionMethod.WEIGHTED,
            vector_weight=self.vector_weight,
            lexical_score_weight=self.lexical_weight,
            threshold=self.threshold,
        )


class MinmaxFusion(_Choice):
    """Min–max normalised linear fusion with a fixed ``denseWeight``."""

    KNOBS: ClassVar[tuple[str, ...]] = ("denseWeight",)
    method: Literal["minmax"] = "minmax"
    dense_weight: Weight | None = None

    def apply(self, settings: FusionSettings) -> FusionSettings:
        return self._update(settings, FusionMethod.MINMAX, dense_weight=self.dense_weight)


class DbsfFusion(_Choice):
    """Distribution-based (mean ± 3σ) normalised linear fusion with a fixed ``denseWeight``."""

    KNOBS: ClassVar[tuple[str, ...]] = ("denseWeight",)
    method: Literal["dbsf"] = "dbsf"
    dense_weight: Weight | None = None

    def apply(self, settings: FusionSettings) -> FusionSettings:
        return self._update(settings, FusionMethod.DBSF, dense_weight=self.dense_weight)


class AdaptiveFusion(_Choice):
    """``minmax`` with the dense weight chosen per query around ``denseWeight``."""

    KNOBS: ClassVar[tuple[str, ...]] = ("denseWeight", "languagePrior")
    method: Literal["adaptive"] = "adaptive"
    dense_weight: Weight | None = None
    language_prior: StrictBool | None = None

    def apply(self, settings: FusionSettings) -> FusionSettings:
        return self._update(
            settings, FusionMethod.ADAPTIVE, dense_weight=self.dense_weight, language_prior=self.language_prior
        )


FusionChoice = Annotated[
    RrfFusion | WeightedFusion | MinmaxFusion | DbsfFusion | AdaptiveFusion,
    Field(discriminator="method"),
]

#: Each method's object model, by method.
CHOICES: dict[FusionMethod, type[_Choice]] = {
    FusionMethod(model.model_fields["method"].default): model
    for model in (RrfFusion, WeightedFusion, MinmaxFusion, DbsfFusion, AdaptiveFusion)
}

#: The ``plait search`` / ``plait explain`` flag of each method's object knob, where there is one.
CLI_FLAGS: dict[FusionMethod, dict[str, str]] = {
    FusionMethod.RRF: {"lexicalWeight": "--lexical-weight"},
    FusionMethod.WEIGHTED: {},
    FusionMethod.MINMAX: {"denseWeight": "--dense-weight"},
    FusionMethod.DBSF: {"denseWeight": "--dense-weight"},
    FusionMethod.ADAPTIVE: {"denseWeight": "--dense-weight", "languagePrior": "--language-prior"},
}


class SavedMethodFusion(_Knobs):
    """A fusion object without a ``method``: knobs for the method the search uses anyway,
    the collection's saved one, else ``adaptive`` (``{"denseWeight": 0.8}`` under a saved
    ``minmax`` is ``{"method": "minmax", "denseWeight": 0.8}``; under ``adaptive`` it is
    the base the per-query weight moves around). A knob that method does not take is
    refused, naming the method, the knobs it takes and the methods that take it."""

    # Each knob is checked here as the methods check it (a weight in 0..1, k ≥ 1); which of
    # them the method takes is known only with the collection: resolve() checks that when
    # the search is planned (plait.retrieval.plan.request_settings).

    KNOBS: ClassVar[tuple[str, ...]] = (
        "k", "lexicalWeight", "vectorWeight", "threshold", "denseWeight", "languagePrior",
    )
    method: None = None
    k: int | None = Field(default=None, ge=1, le=10_000)
    lexical_weight: Weight | Literal["auto"] | None = None
    vector_weight: Weight | None = None
    threshold: Weight | None = None
    dense_weight: Weight | None = None
    language_prior: StrictBool | None = None

    @model_validator(mode="before")
    @classmethod
    def _fusion_knobs(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and (unknown := cls._unknown(data)):
            verb = "is not a knob" if len(unknown) == 1 else "are not knobs"
            raise ValueError(
                f"{', '.join(unknown)} {verb} of any fusion method (between them they take "
                f"{', '.join(cls.KNOBS)})"
            )
        return data

    def given(self) -> dict[str, Any]:
        """The knobs given, camelCase, in the order of :attr:`KNOBS`."""
        values = self.model_dump(by_alias=True, exclude_none=True)
        return {name: values[name] for name in self.KNOBS if name in values}

    def resolve(self, method: FusionMethod, *, where: str = "") -> _Choice:
        """These knobs as ``method``'s own object (``where`` says whose method it is:
        ``" (the collection's method)"``). A knob ``method`` does not take is a
        :class:`~plait.errors.ValidationError` naming ``method``, the knobs it takes (with
        their CLI flags) and the methods that take what was given.

        >>> SavedMethodFusion(dense_weight=0.8).resolve(FusionMethod.MINMAX)
        MinmaxFusion(method='minmax', dense_weight=0.8)
        >>> SavedMethodFusion(dense_weight=0.8).resolve(FusionMethod.RRF, where=" (the collection's method)")
        Traceback (most recent call last):
        plait.errors.ValidationError: denseWeight does not apply to fusion 'rrf' (the collection's method), which takes k and lexicalWeight (CLI: --lexical-weight); name a method that takes denseWeight: 'minmax', 'dbsf' or 'adaptive', e.g. fusion {"method": "minmax", "denseWeight": 0.8} (CLI: --fusion minmax --dense-weight 0.8)
        """
        given = self.given()
        model = CHOICES[method]
        bad = [name for name in given if name not in model.KNOBS]
        if bad:
            raise ValidationError(_saved_knob_error(method, given, bad, where))
        try:
            return model.model_validate({"method": method.value, **given})
        except PydanticValidationError as exc:  # e.g. lexicalWeight 'auto' (RRF's) under weighted
            raise ValidationError(f"fusion: {first_error(exc)} (fusion {method.value!r}{where})") from None


def _listed(names: list[str], last: str) -> str:
    """``a``, ``a and b``, ``a, b and c`` (``last``: 'and' / 'or')."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {last} {names[-1]}"


def _cli(method: FusionMethod, knobs: Mapping[str, Any]) -> str | None:
    """``--fusion minmax --dense-weight 0.8``: ``knobs`` as CLI flags (None: one has none)."""
    flags = CLI_FLAGS[method]
    if any(name not in flags for name in knobs):
        return None
    words = [f"--fusion {method.value}"]
    for name, value in knobs.items():
        if isinstance(value, bool):
            words.append(flags[name] if value else flags[name].replace("--", "--no-", 1))
        else:
            words.append(f"{flags[name]} {value:g}" if isinstance(value, float) else f"{flags[name]} {value}")
    return " ".join(words)


def _saved_knob_error(method: FusionMethod, given: dict[str, Any], bad: list[str], where: str) -> str:
    """Why ``given`` (a method-less object) does not fit ``method``, and what would."""
    takes = CHOICES[method].KNOBS
    flags = [CLI_FLAGS[method][name] for name in takes if name in CLI_FLAGS[method]]
    verb = "does" if len(bad) == 1 else "do"
    text = f"{', '.join(bad)} {verb} not apply to fusion {method.value!r}{where}, which takes " + (
        _listed(list(takes), "and") if takes else "no knobs"
    )
    if flags:
        text += f" (CLI: {', '.join(flags)})"
    others = [m for m in FusionMethod if m != method and all(name in CHOICES[m].KNOBS for name in given)]
    if not others:
        return text
    example = json.dumps({"method": others[0].value, **given})
    text += f"; name a method that takes {_listed(bad, 'and')}: {_listed([repr(m.value) for m in others], 'or')}"
    text += f", e.g. fusion {example}"
    cli = _cli(others[0], given)
    return f"{text} (CLI: {cli})" if cli else text


def decision(settings: FusionSettings, method_from: str) -> FusionDecision:
    """What fusion used for one query: the method's own knobs in effect and its decisions."""
    method = settings.method
    parameters: dict[str, Any]
    if method == FusionMethod.RRF:
        parameters = {"k": settings.rrf_k, "lexicalWeight": settings.lexical_weight}
    elif method == FusionMethod.WEIGHTED:
        parameters = {
            "vectorWeight": settings.vector_weight,
            "lexicalWeight": settings.lexical_score_weight,
            "threshold": settings.threshold,
        }
    elif method == FusionMethod.ADAPTIVE:
        estimated = settings.estimated_base is not None
        parameters = {
            "denseWeight": settings.estimated_base if estimated else settings.dense_weight,
            "denseWeightFrom": "collection estimate" if estimated else "settings",
            "languagePrior": settings.language_prior,
        }
    else:
        parameters = {"denseWeight": settings.dense_weight}
    parameters["overfetch"] = settings.overfetch
    adaptive = method == FusionMethod.ADAPTIVE
    return FusionDecision(
        method=method,
        method_from=method_from,  # type: ignore[arg-type]
        parameters=parameters,
        dense_weight_used=settings.dense_weight_used,
        reason=settings.fusion_reason,
        lexical_weight_reason=settings.lexical_weight_reason if method == FusionMethod.RRF else None,
        query_language=settings.query_language,
        embedder_covers_query=settings.embedder_covers_query if adaptive else None,
        identifier_reason=settings.identifier_reason,
    )
