"""The generated Python package of one example app, driven from Python as a notebook would.

`tests/tests/python_package.rs` builds the package of each example it covers into a venv and runs
this file with `EASEML_PY_APP` (the app's module) and `EASEML_PY_STUBS` (its generated `.pyi`).
Every test uses its own store (`EASEML_HOME` in a temporary folder).
"""

import ast
import importlib
import os
import urllib.request

import numpy as np
import pytest

APP = os.environ["EASEML_PY_APP"]
app_module = importlib.import_module(APP)


@pytest.fixture()
def app(tmp_path, monkeypatch):
    monkeypatch.setenv("EASEML_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("EASEML_SERVER", raising=False)
    return app_module.connect()


def shape_text(shape):
    return "[" + ",".join(str(side) for side in shape) + "]"


def recursive_value(rng, sign, shapes, links):
    """One value of a recursive side in its JSON form: a chain (one link) as a list of 3 to 5
    records, a tree (two or more links) as nested records whose absent children are null; every
    tensor near `sign`."""

    def record():
        return {
            name: (sign + 0.1 * rng.standard_normal(shape)).astype(np.float32).tolist()
            for name, shape in shapes.items()
        }

    if len(links) == 1:
        return [record() for _ in range(int(rng.integers(3, 6)))]

    def node(depth):
        value = record()
        for link in links:
            value[link] = node(depth - 1) if depth > 0 and rng.random() < 0.6 else None
        return value

    return node(2)


def make_examples(count, seed=0):
    """`count` inputs and outputs with a pattern a model can learn: the class (or the regression
    target) follows the sign of the inputs' mean."""
    rng = np.random.default_rng(seed)
    signs = np.where(np.arange(count) % 2 == 0, 1.0, -1.0).astype(np.float32)
    if app_module.INPUT_RECURSIVE:
        inputs = [
            recursive_value(rng, sign, app_module.INPUT_SHAPES, app_module._INPUT_LINKS) for sign in signs
        ]
    else:
        inputs = {
            name: (signs.reshape((-1,) + (1,) * len(shape)) + 0.1 * rng.standard_normal((count,) + shape)).astype(
                np.float32
            )
            for name, shape in app_module.INPUT_SHAPES.items()
        }
        if len(inputs) == 1:
            inputs = next(iter(inputs.values()))
    if app_module.LABELS is not None:
        outputs = [app_module.LABELS[0] if sign > 0 else app_module.LABELS[1] for sign in signs]
    elif app_module.OUTPUT_RECURSIVE:
        outputs = [
            recursive_value(rng, sign, app_module.OUTPUT_SHAPES, app_module._OUTPUT_LINKS) for sign in signs
        ]
    else:
        outputs = {
            name: np.repeat(signs.reshape((-1,) + (1,) * len(shape)), int(np.prod(shape)), axis=-1)
            .reshape((count,) + shape)
            .astype(np.float32)
            for name, shape in app_module.OUTPUT_SHAPES.items()
        }
        if len(outputs) == 1:
            outputs = next(iter(outputs.values()))
    return inputs, outputs


def test_the_stubs_parse_and_name_the_fields_and_labels():
    tree = ast.parse(open(os.environ["EASEML_PY_STUBS"]).read())

    def typed_dict_keys(name):
        (call,) = [
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets)
        ]
        assert isinstance(call, ast.Call) and call.func.id == "TypedDict", ast.dump(call)
        return {key.value for key in call.args[1].keys}

    assert set(app_module.INPUT_SHAPES) <= typed_dict_keys("InputFields")
    assert set(app_module.OUTPUT_SHAPES) <= typed_dict_keys("OutputFields")
    labels = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "Label" for t in node.targets)
    ]
    assert len(labels) == 1
    if app_module.LABELS is not None:
        literal = labels[0].value
        assert isinstance(literal, ast.Subscript) and literal.value.id == "Literal"
        names = [element.value for element in literal.slice.elts]
        assert names == app_module.LABELS
    # Every public function of the module has a stub.
    stubbed = {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    assert {"connect", "App", "RefinePage"} <= stubbed
    assert {"feed", "infer", "train", "status", "examples", "enable", "disable", "refine"} <= stubbed


def test_a_wrong_numpy_shape_names_the_field_and_the_expected_shape(app):
    if app_module.INPUT_RECURSIVE:
        pytest.skip("a recursive input is given in its JSON form; its shapes are checked by the client")
    name, shape = next(iter(app_module.INPUT_SHAPES.items()))
    wrong = tuple(side + 1 for side in shape)
    inputs, outputs = make_examples(4)
    if isinstance(inputs, dict):
        inputs[name] = np.zeros((4,) + wrong, dtype=np.float32)
    else:
        inputs = np.zeros((4,) + wrong, dtype=np.float32)
    with pytest.raises(app_module.ShapeError) as raised:
        app.feed(inputs, outputs)
    message = str(raised.value)
    assert f"input.{name}" in message and shape_text(shape) in message, message
    assert shape_text((4,) + wrong) in message, message
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, app_module.EasemlError)
    assert app.examples() == []


def test_errors_map_to_their_exception_classes(app, tmp_path, monkeypatch):
    with pytest.raises(app_module.NoModelError) as raised:
        inputs, _ = make_examples(1)
        app.infer(inputs)
    assert "no model" in str(raised.value)
    with pytest.raises(app_module.UnreachableError) as raised:
        app_module.connect(server="http://127.0.0.1:9")
    assert isinstance(raised.value, ConnectionError)
    with pytest.raises(app_module.ServerUrlError):
        app_module.connect(server="ftp://example.org")
    if app_module.LABELS is not None:
        inputs, _ = make_examples(2)
        with pytest.raises(app_module.BadInputError) as raised:
            app.feed(inputs, ["no such label", app_module.LABELS[0]])
        assert "no such label" in str(raised.value)
    with pytest.raises(app_module.StoreError):
        app.disable(123456789)
    if app_module.LABELS is not None:
        inputs, _ = make_examples(2)
        with pytest.raises(app_module.BadInputError) as raised:
            app.feed(inputs, [0, len(app_module.LABELS)])
        assert f"label index {len(app_module.LABELS)} is out of range" in str(raised.value)
    if not app_module.INPUT_RECURSIVE:
        inputs, outputs = make_examples(2)
        one_out = outputs[0] if isinstance(outputs, list) else outputs[0]
        with pytest.raises(app_module.ShapeError) as raised:
            app.feed(inputs, one_out)  # a batch of inputs, one output
        assert "the inputs are a batch" in str(raised.value)
        with pytest.raises(app_module.ShapeError) as raised:
            app.feed({"no_such_field": np.zeros(3)}, one_out)
        assert "unknown: no_such_field" in str(raised.value)
    assert app.examples() == []
    monkeypatch.setenv("EASEML_ENGINE_BIN_DIR", str(tmp_path / "no-engine"))
    with pytest.raises(app_module.EngineError) as raised:
        app.train(budget="1s")
    assert str(tmp_path / "no-engine") in str(raised.value)


def test_nan_inputs_are_refused_with_the_binaries_message(app):
    if app_module.INPUT_RECURSIVE:
        pytest.skip("numpy arrays only")
    inputs, outputs = make_examples(3)
    if isinstance(inputs, dict):
        next(iter(inputs.values()))[1].flat[0] = np.nan
    else:
        inputs[1].flat[0] = np.nan
    with pytest.raises(app_module.BadInputError) as raised:
        app.feed(inputs, outputs)
    assert "example(s) are bad; nothing was stored" in str(raised.value), str(raised.value)
    assert app.examples() == []


def test_feed_train_infer_round_trip(app):
    inputs, outputs = make_examples(40)
    fed = app.feed(inputs, outputs)
    assert fed["added"] == 40 and len(fed["ids"]) == 40
    # One example, without the batch axis.
    one_in, one_out = make_examples(1, seed=1)
    if not app_module.INPUT_RECURSIVE:
        one_in = one_in[0] if not isinstance(one_in, dict) else {k: v[0] for k, v in one_in.items()}
    else:
        one_in = one_in[0]
    if isinstance(one_out, list):
        one_out = one_out[0]
    elif isinstance(one_out, dict):
        one_out = {k: v[0] for k, v in one_out.items()}
    else:
        one_out = one_out[0]
    if not app_module.INPUT_RECURSIVE and not isinstance(one_in, dict):
        one_in = {next(iter(app_module.INPUT_SHAPES)): one_in}  # by field name
    assert app.feed(one_in, one_out)["added"] == 1
    examples = app.examples()
    assert len(examples) == 41
    version = app.disable(examples[0]["id"])
    assert app.examples()[0]["enabled"] is False
    assert app.enable(examples[0]["id"]) > version
    if app_module.LABELS is not None:
        assert {example["label"] for example in examples} == set(app_module.LABELS[:2])

    status = app.train(budget=os.environ.get("EASEML_PY_BUDGET", "20s"))
    assert status["app"] == APP and status["examples"] == 41
    assert any(run["state"] == "done" for run in status["runs"]), status["runs"]
    assert status["best"] is not None
    # The served model follows the data: it was trained on the current version (41 examples).
    assert status["best"]["data_version"] == status["data_version"], status["best"]
    assert status["best"]["current"], status["best"]
    assert "serving " + status["best"]["candidate"] in status["summary"], status["summary"]

    answer = app.infer(inputs)
    if isinstance(answer, tuple):  # classification: (labels, confidences)
        labels, confidences = answer
        if app_module.LABELS is not None:
            known = set(app_module.LABELS)
        else:  # no declared labels: the answers are class indices of the one output tensor
            (shape,) = app_module.OUTPUT_SHAPES.values()
            known = set(range(int(np.prod(shape))))
        assert len(labels) == 40 and set(labels) <= known, (labels, known)
        assert confidences.dtype == np.float32 and ((confidences >= 0) & (confidences <= 1)).all()
        label, confidence = app.infer(one_in)
        assert label in known and 0 <= confidence <= 1
    elif app_module.OUTPUT_RECURSIVE:  # each answer in its JSON form: a chain is a list of records
        assert isinstance(answer, list) and len(answer) == 40, answer
        single = app.infer(one_in)
        for value in answer + [single]:
            records = value if isinstance(value, list) else [value]
            assert records, value
            for record in records:
                for name, shape in app_module.OUTPUT_SHAPES.items():
                    array = np.asarray(record[name], dtype=np.float32)
                    assert array.shape == shape and np.isfinite(array).all(), record
    else:
        for name, shape in app_module.OUTPUT_SHAPES.items():
            assert answer[name].shape == (40,) + shape and np.isfinite(answer[name]).all()
        single = app.infer(one_in)
        for name, shape in app_module.OUTPUT_SHAPES.items():
            assert single[name].shape == shape

    page = app.refine(open_browser=False)
    try:
        html = urllib.request.urlopen(page.url, timeout=10).read()
        assert b"<html" in html and APP.encode() in html
    finally:
        page.close()


def test_file_paths_and_images_are_read_as_the_feed_command_reads_them(app, tmp_path):
    if app_module.INPUT_RECURSIVE or len(app_module.INPUT_SHAPES) != 1:
        pytest.skip("paths and images give an input of one tensor field")
    from PIL import Image

    (shape,) = app_module.INPUT_SHAPES.values()
    inputs, outputs = make_examples(2)
    one_out = outputs[0] if isinstance(outputs, list) else outputs[0]
    for index in range(2):
        np.save(tmp_path / f"x{index}.npy", inputs[index])
    assert app.feed(str(tmp_path / "x0.npy"), one_out)["added"] == 1
    both = outputs if isinstance(outputs, list) else outputs[:2]
    assert app.feed([tmp_path / "x0.npy", tmp_path / "x1.npy"], both)["added"] == 2
    with pytest.raises(app_module.BadInputError) as raised:
        app.feed(str(tmp_path / "missing.npy"), one_out)
    assert "missing.npy" in str(raised.value)
    image = Image.new("RGB", (4, 4))
    # An image gives [A,B,3] (RGB), [A,B,1] or [A,B] (grey), resized to A x B.
    takes_images = (len(shape) == 3 and shape[2] in (1, 3)) or len(shape) == 2
    if takes_images:
        assert app.feed(image, one_out)["added"] == 1
    else:
        with pytest.raises(app_module.BadInputError) as raised:
            app.feed(image, one_out)
        assert "an image can only give an input of shape [A,B,3], [A,B,1] or [A,B]" in str(raised.value)
    assert len(app.examples()) == (4 if takes_images else 3)
