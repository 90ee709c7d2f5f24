"""The study archive's checks: an archived run is used only for the config it was
trained with and only with a real checkpoint digest."""

import json

import pytest
import yaml

from nmt.config.load import from_dict
from nmt.study.archive import ArchiveError, archive_records, archived_sha256


def _archive(tmp_path, cfg, sha="ab" * 32):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump(cfg.to_dict()))
    (run / "summary.json").write_text(json.dumps({"epochs": 1}))
    archive_records(tmp_path / "archive", run, sha)
    return tmp_path / "archive"


def test_archive_round_trip_and_its_errors(tmp_path):
    cfg = from_dict({"name": "a", "train": {"seed": 3}})
    folder = _archive(tmp_path, cfg)
    assert archived_sha256(folder, cfg) == "ab" * 32
    # a budget may differ (as --resume allows), the model may not
    assert archived_sha256(folder, from_dict({"name": "a", "train": {"seed": 3, "max_epochs": 99}}))
    with pytest.raises(
        ArchiveError,
        match=r"config.yaml was trained with a different config "
        r"\(train.seed: 3 \(archive\) vs 4 \(study\)\)",
    ):
        archived_sha256(folder, from_dict({"name": "a", "train": {"seed": 4}}))
    (folder / "checkpoint.json").write_text('{"sha256": "x"}')
    with pytest.raises(ArchiveError, match="checkpoint.json: sha256 is not a SHA-256"):
        archived_sha256(folder, cfg)
    for bad in ("{}", "[1, 2]", '{"sha256": 5}'):
        (folder / "checkpoint.json").write_text(bad)
        with pytest.raises(ArchiveError, match="checkpoint.json: sha256 is not a SHA-256"):
            archived_sha256(folder, cfg)
    (folder / "checkpoint.json").write_text("{")
    with pytest.raises(ArchiveError, match=r"checkpoint.json: unreadable \(expected"):
        archived_sha256(folder, cfg)
    (folder / "checkpoint.json").write_text(json.dumps({"sha256": "ab" * 32}))
    (folder / "config.yaml").write_text("[")
    with pytest.raises(ArchiveError, match="config.yaml: unreadable archived config"):
        archived_sha256(folder, cfg)
    (folder / "checkpoint.json").unlink()
    assert archived_sha256(folder, cfg) is None  # incomplete: the run is trained instead


def test_a_damaged_run_summary_is_named(tmp_path):
    """A hand-damaged summary.json (archived or not) names the file, not bare JSON text."""
    from nmt.study.models import run_summary
    from nmt.study.plan import StudyError

    path = tmp_path / "summary.json"
    path.write_text("garbage{")
    with pytest.raises(StudyError, match=r"summary\.json: unreadable run summary"):
        run_summary(path)
    with pytest.raises(StudyError, match=r"missing\.json: not found; nmt train writes it") as e:
        run_summary(tmp_path / "missing.json")
    assert "Errno" not in str(e.value)
    path.write_text('{"epochs": 3}')
    with pytest.raises(StudyError, match="lacks parameters, steps, elapsed_min, best_val_bleu"):
        run_summary(path)
