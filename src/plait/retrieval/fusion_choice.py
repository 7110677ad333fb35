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

A knob that does not apply to the method a search uses (the request's, else the
collection's saved method, else ``adaptive``) is a :class:`~plait.errors.ValidationError`
naming the method and the knobs it takes — never accepted, echoed and ignored.
``overfetch`` applies to every method.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, model_validator

from plait.types import FusionDecision, FusionMethod, FusionSettings, LexicalWeightMode, Model

__all__ = [
    "REQUEST_KNOBS",
    "AdaptiveFusion",
    "DbsfFusion",
    "FusionChoice",
    "MinmaxFusion",
    "RrfFusion",
    "WeightedFusion",
    "decision",
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


def knob_error(method: FusionMethod | str, given: list[str], takes: tuple[str, ...], *, where: str = "") -> str:
    """``lexicalWeight does not apply to fusion 'adaptive': it takes languagePrior (and overfetch)``."""
    value = method.value if isinstance(method, FusionMethod) else method
    names = ", ".join(given)
    verb = "does" if len(given) == 1 else "do"
    knobs = ", ".join(takes) if takes else "no knobs"
    return f"{names} {verb} not apply to fusion {value!r}{where}: it takes {knobs} (and overfetch)"


class _Choice(Model):
    """One method's parameters; unknown knobs are refused naming the method's own."""

    KNOBS: ClassVar[tuple[str, ...]] = ()

    @model_validator(mode="before")
    @classmethod
    def _own_knobs(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            allowed = {"method", *cls.KNOBS, *(cls.model_fields)}
            unknown = [str(key) for key in data if key not in allowed]
            if unknown:
                method = cls.model_fields["method"].default
                raise ValueError(knob_error(method, unknown, cls.KNOBS, where=" (fusion object)"))
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
    language_prior: bool | None = None

    def apply(self, settings: FusionSettings) -> FusionSettings:
        return self._update(
            settings, FusionMethod.ADAPTIVE, dense_weight=self.dense_weight, language_prior=self.language_prior
        )


FusionChoice = Annotated[
    RrfFusion | WeightedFusion | MinmaxFusion | DbsfFusion | AdaptiveFusion,
    Field(discriminator="method"),
]


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
