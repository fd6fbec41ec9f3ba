"""The target registry: stable IDs, generations and speed estimates (spec §5)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from pharos.engine.types import Residency
from pharos.state.records import TargetRecord
from pharos.state.spec import StatRecord
from pharos.state.stats import TargetStats, valid_sample


def target_key(backend_url: str, model: str) -> str:
    return f"{backend_url} {model}"


class TargetRegistry:
    """Targets are registered on first sight and never removed, so IDs (from 1) stay stable."""

    def __init__(self) -> None:
        self._records: list[TargetRecord] = []
        self._id_by_key: dict[str, int] = {}
        self._ids_by_model: dict[str, list[int]] = {}
        self._ever_listed: set[str] = set()
        self._restored: dict[str, TargetStats] = {}
        self.restores = 0  # counts restore() calls: State's model views start over on one

    def register(self, backend_url: str, model: str, served_model: str) -> TargetRecord:
        key = target_key(backend_url, model)
        target_id = self._id_by_key.get(key)
        if target_id is not None:
            record = self._records[target_id - 1]
            record.served_model = served_model
            return record
        record = TargetRecord(
            target_id=len(self._records) + 1,
            key=key,
            backend_url=backend_url,
            model=model,
            served_model=served_model,
        )
        self._records.append(record)
        self._id_by_key[key] = record.target_id
        self._ids_by_model.setdefault(model, []).append(record.target_id)
        self._ever_listed.add(model)
        return record

    def get(self, target_id: int) -> TargetRecord | None:
        if 1 <= target_id <= len(self._records):
            return self._records[target_id - 1]
        return None

    def ids_of_model(self, model: str) -> tuple[int, ...]:
        return tuple(self._ids_by_model.get(model, ()))

    def count_of_model(self, model: str) -> int:
        ids = self._ids_by_model.get(model)
        return 0 if ids is None else len(ids)

    def __iter__(self) -> Iterator[TargetRecord]:
        return iter(tuple(self._records))

    def id_of(self, key: str) -> int | None:
        return self._id_by_key.get(key)

    def ever_listed(self, model: str) -> bool:
        return model in self._ever_listed

    def note_residency(self, record: TargetRecord, state: Residency, at: float | None) -> bool:
        """Record a residency reading; True when it is an unload (the generation was bumped).

        A reading older than the last successful reply is ignored: the reply loaded the model
        after the engine was read."""
        if state is Residency.UNKNOWN:
            return False
        replied = record.reply_loaded_at
        if at is not None and replied is not None and at < replied:
            return False
        unloaded = state is Residency.COLD and record.last_residency not in (None, Residency.COLD)
        record.last_residency = state
        if unloaded:
            record.generation += 1
        return unloaded

    @staticmethod
    def bump(record: TargetRecord) -> None:
        record.generation += 1

    @staticmethod
    def forget(record: TargetRecord) -> None:
        """The backend is gone for good: local stats and residency go, prefix entries too."""
        record.generation += 1
        record.stats = TargetStats()
        record.reply_loaded_at = None
        record.last_residency = None

    @staticmethod
    def observe(
        record: TargetRecord,
        *,
        prefill_s_per_token: float | None,
        load_s: float | None,
        service_s: float | None,
    ) -> None:
        record.stats = record.stats.observed(
            prefill_s_per_token=prefill_s_per_token if valid_sample(prefill_s_per_token) else None,
            load_s=load_s if valid_sample(load_s) else None,
            service_s=service_s if valid_sample(service_s) else None,
        )

    def restored_for(self, key: str) -> TargetStats | None:
        return self._restored.get(key)

    def restore(self, records: Iterable[StatRecord]) -> None:
        """Peer or state-file estimates; used only for stats a target has no local sample of.

        Per field the larger known value wins (the slower, safer estimate), so restoring
        from several snapshots in any order, any number of times, gives the same stats."""
        self.restores += 1
        for item in records:
            old = self._restored.get(item.key)
            self._restored[item.key] = TargetStats(
                prefill_s_per_token=_larger(
                    old.prefill_s_per_token if old is not None else None,
                    item.prefill_s_per_token,
                ),
                load_s=_larger(old.load_s if old is not None else None, item.load_s),
                service_s=_larger(old.service_s if old is not None else None, item.service_s),
            )

    def export(self) -> list[StatRecord]:
        """Every target's effective estimates (local, else restored) that know anything."""
        out: list[StatRecord] = []
        keys_seen: set[str] = set()
        for record in self._records:
            stats = record.stats.over(self._restored.get(record.key))
            keys_seen.add(record.key)
            out.append(_record(record.key, stats))
        for key, stats in self._restored.items():
            if key not in keys_seen:
                out.append(_record(key, stats))
        return [
            item
            for item in out
            if not (
                item.prefill_s_per_token is None and item.load_s is None and item.service_s is None
            )
        ]


def _record(key: str, stats: TargetStats) -> StatRecord:
    return StatRecord(
        key=key,
        prefill_s_per_token=stats.prefill_s_per_token,
        load_s=stats.load_s,
        service_s=stats.service_s,
    )


def _larger(old: float | None, new: float | None) -> float | None:
    """The larger of two estimates, ignoring unknown and invalid ones."""
    if new is None or not valid_sample(new):
        return old
    return new if old is None or new > old else old
