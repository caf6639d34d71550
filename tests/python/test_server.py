"""The generated Python package against an `easeml serve` server (`connect(server=...)`), as a
notebook on a laptop uses a lab's server.

`tests/tests/python_package.rs` starts the server (and an engine training beside it) for one
example app with declared labels and sets `EASEML_PY_SERVER` to its URL; without it these tests
are skipped. Each test keeps its token files in its own `EASEML_CONFIG_DIR`.
"""

import os
import time

import numpy as np
import pytest

from test_app import APP, app_module, make_examples

SERVER = os.environ.get("EASEML_PY_SERVER")
pytestmark = pytest.mark.skipif(SERVER is None, reason="no server (EASEML_PY_SERVER is not set)")


@pytest.fixture()
def config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("EASEML_CONFIG_DIR", str(tmp_path / "config"))
    # A local store must not be touched: point it where the test can see that it was not made.
    monkeypatch.setenv("EASEML_HOME", str(tmp_path / "local-home"))
    monkeypatch.delenv("EASEML_TOKEN", raising=False)
    monkeypatch.delenv("EASEML_SERVER", raising=False)
    return tmp_path


def test_feed_train_infer_through_a_server(config_dir):
    assert app_module.LABELS is not None, "the server test takes an app with declared labels"
    app = app_module.connect(server=SERVER)
    assert app._native.server == SERVER and app._native.home is None
    assert SERVER in repr(app)
    inputs, outputs = make_examples(40)
    with pytest.raises(app_module.NoModelError):
        app.infer(inputs)

    fed = app.feed(inputs, outputs)
    assert fed["added"] == 40 and len(fed["ids"]) == 40
    # The token was saved when the app registered: a new connection finds it, and sees the data.
    tokens = [path for path in (config_dir / "config").rglob("*") if path.is_file()]
    assert tokens, "no token file was written"
    again = app_module.connect(server=SERVER)
    examples = again.examples()
    assert len(examples) == 40
    assert {example["label"] for example in examples} == set(app_module.LABELS[:2])
    version = again.disable(examples[0]["id"])
    assert again.examples()[0]["enabled"] is False
    assert again.enable(examples[0]["id"]) > version
    # A wrong token is refused with the class of its kind, and the app's data stays.
    with pytest.raises(app_module.UnauthorizedError):
        app_module.connect(server=SERVER, token="not-the-token").examples()
    assert len(app.examples()) == 40
    # Wrong shapes are refused before anything is sent.
    with pytest.raises(app_module.ShapeError):
        app.feed(np.zeros((2, 3, 3), dtype=np.float32), outputs[:2])
    assert not (config_dir / "local-home").exists(), "a server app made a local store"
    # The model of a server's app is exported on the server's machine, and nothing is written here.
    with pytest.raises(app_module.EngineError, match="easeml export"):
        app.export(config_dir / "exported")
    assert not (config_dir / "exported").exists()

    # On a server, `train` returns the status: the server's engine trains in the background.
    status = app.train()
    assert status["app"] == APP and status["examples"] == 40
    deadline = time.monotonic() + 240
    while status["best"] is None:
        assert time.monotonic() < deadline, f"no model within 240 s: {status}"
        time.sleep(1)
        status = app.status()
    assert any(run["state"] == "done" for run in status["runs"]), status["runs"]

    labels, confidences = app.infer(inputs)
    assert len(labels) == 40 and set(labels) <= set(app_module.LABELS), labels
    assert confidences.dtype == np.float32 and ((confidences >= 0) & (confidences <= 1)).all()
    label, confidence = app.infer(inputs[0])
    assert label in app_module.LABELS and 0 <= confidence <= 1
    probabilities = app.probabilities(inputs)  # through the server, as embedded
    assert probabilities.shape == (40, len(app_module.LABELS))
    answered = probabilities[np.arange(40), [app_module.LABELS.index(label) for label in labels]]
    np.testing.assert_allclose(answered, confidences, atol=1e-6)
    assert app.refine(open_browser=False).url == f"{SERVER.rstrip('/')}/apps/{APP}/refine"
