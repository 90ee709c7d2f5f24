"""Config loading, dotted overrides and validation errors that name the key."""

import re

import pytest

from nmt.config.load import apply_overrides, from_dict, load_config
from nmt.config.schema import Config, ConfigError
from nmt.config.yaml_file import read_yaml


def test_defaults_and_roundtrip():
    cfg = from_dict({})
    assert cfg == Config()
    assert from_dict(cfg.to_dict()) == cfg


def test_overrides_are_typed(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("name: x\nmodel:\n  attention: additive\n")
    cfg = load_config(
        path,
        [
            "model.attention=general",
            "train.max_minutes=1.5",
            "data.test_splits=[a, b]",
            "train.patience=null",
        ],
    )
    assert cfg.model.attention == "general"
    assert cfg.train.max_minutes == 1.5
    assert cfg.data.test_splits == ("a", "b")
    assert cfg.train.patience is None


@pytest.mark.parametrize(
    "raw,message",
    [
        ({"model": {"atention": "dot"}}, "model.atention: unknown key"),
        ({"model": {"attention": "cosine"}}, "model.attention: 'cosine' is not one of"),
        ({"model": {"emb_dim": "big"}}, "model.emb_dim: expected an integer"),
        ({"model": {"emb_dim": -3}}, "model.emb_dim: must be positive"),
        ({"train": {"batch_size": 0}}, "train.batch_size: must be positive"),
        ({"model": {"dropout": 1.5}}, "model.dropout"),
        ({"model": {"attention": "dot", "dec_hidden": 100}}, "model.attention: 'dot'"),
        ({"data": {"src_lang": "en", "tgt_lang": "en"}}, "data.tgt_lang"),
        ({"train": {"progress": "yes"}}, "train.progress: expected true or false"),
        ({"train": 3}, "train: expected a mapping"),
        ({"search": {"beam_size": 0}}, "search.beam_size: must be positive"),
        ({"model": {"tie_embeddings": True, "output_dim": 100}}, "model.tie_embeddings: needs"),
        ({"name": "../etc"}, "name: '../etc' must be"),
        ({"data": {"train_join_ks": [1]}}, "data.train_join_ks: every k must be at least 2"),
        ({"data": {"valid_join_ks": [1]}}, "data.valid_join_ks: every k must be at least 2"),
        ({"data": {"train_join_per_k": 0}}, "data.train_join_per_k: must be positive"),
    ],
)
def test_invalid_values_name_the_dotted_key(raw, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("(", r"\(")):
        from_dict(raw)


def test_exponent_without_a_dot_is_a_number(tmp_path):
    # YAML 1.1 (PyYAML) reads 1e-3 as a string; in a file and in an override it is a number
    path = tmp_path / "c.yaml"
    path.write_text("train:\n  lr: 5e-4\n")
    assert load_config(path).train.lr == 5e-4
    cfg = load_config(path, ["train.lr=1E-3", "train.label_smoothing=1e-1"])
    assert (cfg.train.lr, cfg.train.label_smoothing) == (1e-3, 0.1)
    with pytest.raises(ConfigError, match="train.lr: expected a number, got '1e'"):
        load_config(path, ["train.lr=1e"])


def test_override_errors(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("name: x\n")
    with pytest.raises(ConfigError, match="expected key=value"):
        load_config(path, ["model.attention"])
    with pytest.raises(ConfigError, match="model.nope: unknown key"):
        load_config(path, ["model.nope=1"])
    with pytest.raises(ConfigError, match="override 'name.sub=1': name is not a section"):
        apply_overrides({"name": "x"}, ["name.sub=1"])
    path.write_text("name: x\nmodel:\n  attention: dot\n")
    with pytest.raises(ConfigError, match="override 'model.attention.x=1': model.attention is"):
        load_config(path, ["model.attention.x=1"])


def test_bad_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: [unclosed\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config(bad)


def test_a_key_given_twice_or_non_utf8_text_is_an_error_naming_file_and_line(tmp_path):
    """Plain YAML keeps the last of two ``train:`` blocks, so the first one's settings
    would be dropped without a word; and a Latin-1 file named no file at all."""
    path = tmp_path / "dup.yaml"
    path.write_text("name: a\ntrain:\n  lr: 0.5\nmodel:\n  emb_dim: 8\ntrain:\n  seed: 3\n")
    with pytest.raises(
        ConfigError,
        match=re.escape(
            "dup.yaml:6:1: invalid YAML: the key 'train' is given twice (first at line 2)"
        ),
    ):
        load_config(path)
    path.write_text("name: a\ntrain: {lr: 0.1, seed: 2, lr: 0.2}\n")
    with pytest.raises(ConfigError, match=r"dup\.yaml:2:\d+: .*'lr' is given twice"):
        load_config(path)
    path.write_text("model:\n  emb_dim: 8\ntrain:\n  seed: 2\n")  # same keys, other sections
    assert load_config(path).train.seed == 2
    # a merge key may be overridden by the mapping's own keys: that is YAML, not a mistake
    path.write_text("x: &t {seed: 1, lr: 0.5}\ntrain:\n  <<: *t\n  seed: 4\n")
    assert apply_overrides(read_yaml(path), [])["train"] == {"seed": 4, "lr": 0.5}
    path.write_text("name: a\n? [1, 2]\n: 3\n")  # an unhashable key: YAML's own error
    with pytest.raises(ConfigError, match=r"dup\.yaml:2:\d+: invalid YAML: found unhashable key"):
        load_config(path)
    path.write_bytes(b"\xff\xfename: x\n")
    with pytest.raises(ConfigError, match=r"dup\.yaml: not UTF-8 text \(byte 0xff at offset 0\)"):
        load_config(path)


def test_every_shipped_config_loads():
    from pathlib import Path

    from nmt.config.load import load_study_config

    configs = sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.yaml"))
    assert len(configs) > 10
    for path in configs:
        if path.name.startswith("study_"):
            study = load_study_config(path)
            load_config(study.base_config, list(study.overrides))
        else:
            load_config(path)


def test_study_ranges_and_attention_lists_are_checked_before_training(tmp_path):
    from nmt.config.load import load_study_config

    path = tmp_path / "s.yaml"
    for text, message in [
        ("buckets: '1-10,5-20'\n", "buckets: range '5-20' overlaps"),
        ("drop_buckets: '10-1,20-30'\n", "drop_buckets: range '10-1' ends before it starts"),
        ("drop_buckets: '0-5,6-9'\n", "drop_buckets: range '0-5' starts below 1 word"),
        ("attentions: [none, none, additive]\n", "attentions: ['none', 'none', 'additive'] names"),
        ("cap_attentions: [bogus]\n", "cap_attentions: 'bogus' is not one of"),
    ]:
        path.write_text(text)
        with pytest.raises(ConfigError, match=re.escape(message)):
            load_study_config(path)


def test_errors_name_the_override_and_the_yaml_line(tmp_path):
    from nmt.config.load import load_config

    path = tmp_path / "c.yaml"
    path.write_text("model:\n  emb_dim: 16\n")
    with pytest.raises(
        ConfigError,
        match=re.escape("c.yaml with override 'model.emb_dim=-3': model.emb_dim: must be positive"),
    ):
        load_config(path, ["model.emb_dim=-3"])
    # a misspelt section in an override is the override's fault, not the file's
    with pytest.raises(
        ConfigError,
        match=re.escape("c.yaml with override 'trian.max_epochs=3': trian: unknown key"),
    ):
        load_config(path, ["train.max_epochs=2", "trian.max_epochs=3"])
    # a clash of two keys blames both overrides, in the order given; of a key given twice, the
    # last setting, which is the one in force
    with pytest.raises(
        ConfigError,
        match=re.escape(
            "c.yaml with overrides 'model.attention=dot', 'model.enc_hidden=128': "
            "model.attention: 'dot' scores s.h_i and needs model.dec_hidden == 2 * "
            "model.enc_hidden, got 512 and 2 * 128"
        ),
    ):
        load_config(
            path,
            [
                "model.enc_hidden=64",
                "model.attention=dot",
                "model.enc_hidden=128",
                "model.emb_dim=32",
            ],
        )
    # the known keys listed after an unknown one are not blamed ('name' is one of them)
    with pytest.raises(
        ConfigError,
        match=re.escape("c.yaml with override 'modelattention=dot': modelattention: unknown key"),
    ):
        load_config(path, ["modelattention=dot", "name=probe1", "train.seed=3"])
    path.write_text("model:\n  emb_dim: [1\n  x: 2\n")
    with pytest.raises(ConfigError, match=r"c\.yaml:3:\d+: invalid YAML: ") as e:
        load_config(path)
    assert "\n" not in str(e.value)


def test_an_empty_config_file_is_refused_not_trained_on_defaults(tmp_path):
    for text in ("", "# only a comment\n", "\n\n"):
        empty = tmp_path / "empty.yaml"
        empty.write_text(text)
        with pytest.raises(ConfigError, match=r"empty\.yaml: the config is empty"):
            load_config(empty)


@pytest.mark.parametrize(
    "override, key",
    [
        ("model.attention=dot", "model.attention"),
        ("model.attention = dot", "model.attention"),
        ("model={attention: dot, emb_dim: 8}", "model.attention"),
        ("name=mine", "name"),
    ],
)
def test_a_study_override_of_a_key_the_study_sets_is_refused(tmp_path, override, key):
    """The study sets model.attention and name per model: such an override was ignored."""
    from nmt.config.load import load_study_config

    path = tmp_path / "s.yaml"
    path.write_text(f"overrides: ['train.seed=3', '{override}']\n")
    with pytest.raises(ConfigError) as e:
        load_study_config(path)
    assert str(e.value).startswith(
        f"{path}: overrides: {override!r} sets {key}, which the "
        "study sets for each model itself, so it would be ignored; "
    )
    assert "\n" not in str(e.value)
    path.write_text(
        "base_config: configs/multi30k_deen_additive.yaml\n"
        "overrides: ['train.seed=3', 'model.emb_dim=8', 'data.max_train_words=30']\n"
    )
    load_study_config(path)  # keys the study leaves alone
    path.write_text("attentions: [none, additive]\n")  # the same on the command line
    with pytest.raises(
        ConfigError,
        match=re.escape(
            "with override 'overrides=[model.attention=dot]': overrides: 'model.attention=dot' "
            "sets model.attention"
        ),
    ):
        load_study_config(path, ["overrides=[model.attention=dot]"])


@pytest.mark.parametrize("name", ["café", "run ü", "-lead", ".hidden", "a/b", "ＡＢ"])
def test_the_run_name_check_says_exactly_what_it_accepts(name):
    with pytest.raises(ConfigError) as e:
        from_dict({"name": name})
    assert str(e.value) == (
        f"name: {name!r} must be ASCII letters (A-Z, a-z), digits (0-9), "
        "'.', '_' or '-', beginning with a letter or digit (it names the "
        "run directory)"
    )
    from_dict({"name": "Run_1.a-b"})


def test_resume_conflicts_are_the_changes_resume_may_not_make():
    from nmt.config.differences import resume_conflicts

    stored = from_dict({"train": {"max_epochs": 5}})
    given = from_dict({"train": {"max_epochs": 9}, "model": {"enc_hidden": 48}})
    changes = resume_conflicts(stored, given)
    assert [k for k, _, _ in changes.changed] == ["model.enc_hidden", "train.max_epochs"]
    assert changes.conflicts == [("model.enc_hidden", stored.model.enc_hidden, 48)]
    assert resume_conflicts(stored, stored).changed == []


def test_overrides_that_the_config_never_reads_are_warned_about(tmp_path):
    """``model.heads=4`` with additive attention trained without a word (fresh-user report,
    2026-12-04): such keys stay valid, so one config serves every attention, but a typed
    override that cannot act is named, with the setting that makes it idle."""
    from nmt.config.load import ignored_overrides

    path = tmp_path / "c.yaml"
    path.write_text("model:\n  attention: additive\n")
    given = [
        "model.heads=4",
        "model.local_window=5",
        "subwords.nbest_size=8",
        "model.word_dropout_target=true",
        "train.seed=2",
    ]
    warnings = ignored_overrides(load_config(path, given), given)
    assert warnings == [
        "warning: override 'model.heads=4' has no effect with model.attention=additive "
        "(only multihead uses it)",
        "warning: override 'model.local_window=5' has no effect with model.attention=additive "
        "(only local_m and local_p use it)",
        "warning: override 'subwords.nbest_size=8' has no effect with subwords.sampling_alpha "
        "unset (it is used only when sampling)",
        "warning: override 'model.word_dropout_target=true' has no effect with "
        "model.word_dropout=0",
    ]
    # the same keys where they act: nothing to say
    acting = [
        "model.attention=multihead",
        "model.heads=4",
        "subwords.sampling_alpha=0.1",
        "subwords.nbest_size=8",
        "model.word_dropout=0.1",
        "model.word_dropout_target=true",
    ]
    assert ignored_overrides(load_config(path, acting), acting) == []
    local = ["model.attention=local_p", "model.local_window=5", "model.local_score=dot"]
    assert ignored_overrides(load_config(path, local), local) == []


def test_a_study_without_base_config_is_refused(tmp_path):
    """A default base config would train (say) an en->fr study on the de->en recipe without
    a word: the key is required in the file, or as an override."""
    from nmt.config.load import load_study_config

    path = tmp_path / "s.yaml"
    path.write_text("name: enfr\nattentions: [none, additive]\n")
    with pytest.raises(ConfigError, match=re.escape(f"{path}: base_config: missing; name")):
        load_study_config(path)
    cfg = load_study_config(path, ["base_config=configs/multi30k_enfr_additive.yaml"])
    assert cfg.base_config == "configs/multi30k_enfr_additive.yaml"
