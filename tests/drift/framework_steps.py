"""Failing steps of TensorFlow / Keras, JAX, ONNX Runtime, PaddlePaddle, MXNet, Lightning and
diffusers whose error wordings come from host code, one per process: the other runtimes' words for
the classes `steps.py` makes torch print.

    python tests/drift/framework_steps.py NAME     run the step NAME: it fails, and its error ends the process
    python tests/drift/framework_steps.py --list   print every step as NAME CLASS CONFIDENCE FRAMEWORK [ALSO...]

Each step is a mistake users make, small enough to fail in a second on a CPU: shapes that do not
multiply, concatenate or reshape, a Keras layer or loss given another width, mixed dtypes, an
index past its table (TensorFlow checks indices on the CPU; JAX clamps them silently, so it has
no index step), NaN found by a numerics check, a GPU asked of a CPU-only JAX, and decoys (a
missing file) that must not read as a GPU failure; ONNX Runtime's steps run graphs built here
with `onnx.helper` on its CPU provider (an input of another dtype or width, a MatMul whose
dimensions differ, a Gather past its table); PaddlePaddle's and MXNet's run the same mistakes on
their CPU packages (MXNet's embedding clamps ids, so it has no index step; its parameters loaded
into a head of another size stand for the checkpoint class); Lightning's fit the same mistakes inside
a LightningModule on the CPU, with the progress bar and summaries a Trainer prints (Lightning 2 or
pytorch_lightning 1.x, whichever is installed); diffusers' build small UNets here (no download) and
make the same mistakes with them: a saved UNet loaded with another number of channels, a latent
of other channels, text embeddings of another width, a bfloat16 UNet given float32, a class label
past the classes, a GPU asked of a machine with none. FRAMEWORK is `tensorflow`, `jax`,
`onnxruntime`, `paddle`, `mxnet`, `lightning` or `diffusers`: the generator (`generate_frameworks.py`) names each log after
that framework's version.
"""

import os
import sys
from dataclasses import dataclass, field
from typing import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")


@dataclass(frozen=True)
class Step:
    run: Callable[[], None]
    expected: str
    confidence: str
    framework: str
    also: tuple = field(default_factory=tuple)


# ---------------------------------------------------------------- TensorFlow / Keras


def tf_matmul_sizes():
    """A flattened image size that is not the weight matrix's first dimension."""
    import tensorflow as tf

    images = tf.random.normal([32, 784])
    weights = tf.random.normal([512, 10])
    print(tf.reduce_sum(tf.matmul(images, weights)).numpy())


def tf_add_incompatible_shapes():
    """A residual added to a projection of another width."""
    import tensorflow as tf

    x = tf.random.normal([32, 10])
    print(tf.reduce_sum(x + tf.random.normal([32, 5])).numpy())


def tf_concat_dimensions():
    """A skip connection concatenated with an upsampled map one pixel smaller (odd input size)."""
    import tensorflow as tf

    skip = tf.random.normal([1, 32, 32, 64])
    up = tf.random.normal([1, 31, 31, 64])
    print(tf.reduce_sum(tf.concat([skip, up], axis=-1)).numpy())


def tf_reshape_values():
    """A reshape to a size the tensor does not have."""
    import tensorflow as tf

    features = tf.random.normal([1024])
    print(tf.reduce_sum(tf.reshape(features, [32, 64])).numpy())


def keras_dense_input_width():
    """A model built for 784 features fed 100."""
    import keras
    import numpy as np

    model = keras.Sequential([keras.Input(shape=(784,)), keras.layers.Dense(10)])
    print(model.predict(np.random.rand(8, 100).astype("float32"), verbose=0).sum())


def keras_loss_target_shape():
    """Integer labels given to categorical (one-hot) cross-entropy."""
    import keras
    import numpy as np

    model = keras.Sequential([keras.Input(shape=(16,)), keras.layers.Dense(10, activation="softmax")])
    model.compile(optimizer="adam", loss="categorical_crossentropy")
    x = np.random.rand(64, 16).astype("float32")
    y = np.random.randint(0, 10, size=(64, 1))
    model.fit(x, y, epochs=1, batch_size=16, verbose=0)


def tf_matmul_double_float():
    """NumPy's float64 features multiplied with float32 weights."""
    import numpy as np
    import tensorflow as tf

    features = tf.constant(np.random.rand(4, 8))
    weights = tf.random.normal([8, 2])
    print(tf.reduce_sum(tf.matmul(features, weights)).numpy())


def tf_add_int_float():
    """Integer labels added to float scores."""
    import tensorflow as tf

    labels = tf.constant([1, 0, 2])
    scores = tf.constant([0.5, 0.1, 0.9])
    print(tf.reduce_sum(labels + scores).numpy())


def tf_gather_past_dimension():
    """Per-class rows picked by a label the table lacks."""
    import tensorflow as tf

    table = tf.random.normal([10, 4])
    print(tf.reduce_sum(tf.gather(table, [3, 12])).numpy())


def keras_embedding_past_vocabulary():
    """Token ids of a bigger tokenizer fed to an embedding of 100 rows."""
    import keras
    import numpy as np

    embed = keras.layers.Embedding(100, 8)
    ids = np.array([[5, 150, 7]])
    print(np.asarray(embed(ids)).sum())


def keras_sparse_labels_past_classes():
    """Labels 0..11 given to a 10-way head with sparse categorical cross-entropy."""
    import keras
    import numpy as np

    model = keras.Sequential([keras.Input(shape=(16,)), keras.layers.Dense(10)])
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = np.random.rand(64, 16).astype("float32")
    y = np.random.randint(0, 12, size=(64,))
    y[0] = 11
    model.fit(x, y, epochs=1, batch_size=64, verbose=0)


def tf_check_numerics_nan():
    """The log of a probability that reached zero, caught by check_numerics."""
    import tensorflow as tf

    probs = tf.constant([0.5, 0.0, -0.25])
    loss = tf.debugging.check_numerics(tf.math.log(probs), "log-likelihood")
    print(tf.reduce_sum(loss).numpy())


def tf_missing_file_decoy():
    """A dataset path that does not exist: no GPU failure."""
    import tensorflow as tf

    print(len(tf.io.read_file("/nonexistent/train.tfrecord").numpy()))


# ---------------------------------------------------------------- JAX


def jax_dot_shapes():
    """A flattened image size that is not the weight matrix's first dimension."""
    import jax.numpy as jnp

    print(jnp.dot(jnp.ones((8, 784)), jnp.ones((512, 10))).sum())


def jax_add_incompatible_shapes():
    """A residual added to a projection of another width."""
    import jax.numpy as jnp

    print((jnp.ones((32, 10)) + jnp.ones((32, 5))).sum())


def jax_reshape_size():
    """A reshape to a size the array does not have."""
    import jax.numpy as jnp

    print(jnp.ones(1024).reshape(32, 64).sum())


def jax_lax_add_dtypes():
    """lax (no implicit promotion) given float32 and int32."""
    import jax.numpy as jnp
    from jax import lax

    print(lax.add(jnp.ones(3, jnp.float32), jnp.ones(3, jnp.int32)).sum())


def jax_debug_nans():
    """A log of a negative value with jax_debug_nans on."""
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_debug_nans", True)
    print(jnp.log(jnp.array([0.5, -1.0])).sum())


def jax_gpu_on_cpu_build():
    """Arrays put on a GPU by a CPU-only jaxlib."""
    import jax
    import jax.numpy as jnp

    gpu = jax.devices("gpu")[0]
    print(jax.device_put(jnp.ones(4), gpu).sum())


def jax_missing_file_decoy():
    """A checkpoint path that does not exist: no GPU failure."""
    import jax.numpy as jnp
    import numpy as np

    print(jnp.asarray(np.load("/nonexistent/params.npy")).sum())


# ---------------------------------------------------------------- ONNX Runtime


def _onnx_session(nodes, inputs, outputs, initializers=()):
    """An ONNX Runtime session (CPU) of a graph built here: nothing is downloaded or exported."""
    import onnx
    import onnxruntime as ort
    from onnx import helper

    graph = helper.make_graph(nodes, "step", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _linear(features_in):
    """A MatMul by a [784, 10] weight, its input declared as [batch, FEATURES_IN] float32."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.random.rand(784, 10).astype("float32"), "w")
    node = helper.make_node("MatMul", ["x", "w"], ["y"], name="classifier")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", features_in])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 10])
    return _onnx_session([node], [x], [y], [weight])


def ort_input_float64():
    """NumPy's float64 batch fed to a float32 model."""
    import numpy as np

    print(_linear(784).run(None, {"x": np.random.rand(8, 784)})[0].sum())


def ort_input_width():
    """A model exported for 784 features fed 100."""
    import numpy as np

    print(_linear(784).run(None, {"x": np.random.rand(8, 100).astype("float32")})[0].sum())


def ort_matmul_dimensions():
    """A model whose input width was left dynamic, fed a width the weight does not have."""
    import numpy as np

    print(_linear("features").run(None, {"x": np.random.rand(8, 100).astype("float32")})[0].sum())


def ort_gather_past_table():
    """Token ids past a 10-row embedding table exported as a Gather."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    table = numpy_helper.from_array(np.random.rand(10, 4).astype("float32"), "table")
    node = helper.make_node("Gather", ["table", "ids"], ["rows"], name="embed")
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, ["n"])
    rows = helper.make_tensor_value_info("rows", TensorProto.FLOAT, ["n", 4])
    session = _onnx_session([node], [ids], [rows], [table])
    print(session.run(None, {"ids": np.array([3, 12], dtype="int64")})[0].sum())


def ort_missing_model_decoy():
    """A model path that does not exist: no GPU failure."""
    import onnxruntime as ort

    ort.InferenceSession("/nonexistent/model.onnx", providers=["CPUExecutionProvider"])


# ---------------------------------------------------------------- PaddlePaddle


def paddle_matmul_sizes():
    """A flattened image size that is not the weight matrix's first dimension."""
    import paddle

    print(paddle.matmul(paddle.randn([32, 784]), paddle.randn([512, 10])).sum().item())


def paddle_add_incompatible_shapes():
    """A residual added to a projection of another width."""
    import paddle

    print((paddle.randn([32, 10]) + paddle.randn([32, 5])).sum().item())


def paddle_reshape_size():
    """A reshape to a shape that holds more values than the tensor."""
    import paddle

    print(paddle.reshape(paddle.randn([1024]), [32, 64]).sum().item())


def paddle_linear_input_width():
    """A Linear layer built for 784 features given 100."""
    import paddle

    print(paddle.nn.Linear(784, 10)(paddle.randn([8, 100])).sum().item())


def paddle_matmul_double_float():
    """float64 data (NumPy's default) multiplied with float32 weights."""
    import paddle

    x = paddle.randn([4, 4], dtype="float64")
    print(paddle.matmul(x, paddle.randn([4, 4], dtype="float32")).sum().item())


def paddle_embedding_past_vocabulary():
    """A token id past the embedding table (Paddle checks ids on the CPU)."""
    import paddle

    print(paddle.nn.Embedding(10, 4)(paddle.to_tensor([[1, 12]])).sum().item())


def paddle_cross_entropy_label_past_classes():
    """A label past the number of classes of the logits."""
    import paddle
    import paddle.nn.functional as F

    print(F.cross_entropy(paddle.randn([8, 10]), paddle.to_tensor([[11]] * 8)).item())


def paddle_check_nan_inf():
    """FLAGS_check_nan_inf finds the NaN a log of a negative value makes."""
    import paddle

    paddle.set_flags({"FLAGS_check_nan_inf": 1})
    print(paddle.log(paddle.to_tensor([1.0, -1.0])).sum().item())


def paddle_gpu_on_cpu_build():
    """A GPU asked of the CPU-only paddlepaddle package."""
    import paddle

    paddle.set_device("gpu")
    print(paddle.zeros([1]))


def paddle_missing_file_decoy():
    """A checkpoint path that does not exist: no GPU cause."""
    import paddle

    paddle.load("/nonexistent/model.pdparams")


# ---------------------------------------------------------------- MXNet


def mxnet_dot_shapes():
    """A flattened image size that is not the weight matrix's first dimension."""
    import mxnet as mx

    nd = mx.nd
    print(nd.dot(nd.random.normal(shape=(32, 784)), nd.random.normal(shape=(512, 10))).sum().asscalar())


def mxnet_add_incompatible_shapes():
    """A residual added to a projection of another width."""
    import mxnet as mx

    print((mx.nd.ones((32, 10)) + mx.nd.ones((32, 5))).sum().asscalar())


def mxnet_concat_dimensions():
    """A skip connection concatenated with an upsampled map one pixel smaller (odd input size)."""
    import mxnet as mx

    print(mx.nd.concat(mx.nd.ones((1, 64, 32, 32)), mx.nd.ones((1, 64, 31, 31)), dim=1).sum().asscalar())


def mxnet_dense_input_width():
    """A Gluon Dense layer built for 784 features given 100."""
    import mxnet as mx
    from mxnet.gluon import nn

    net = nn.Dense(10, in_units=784)
    net.initialize()
    print(net(mx.nd.ones((8, 100))).sum().asscalar())


def mxnet_dot_double_float():
    """float64 data multiplied with float32 weights."""
    import mxnet as mx

    x = mx.nd.ones((4, 4), dtype="float64")
    print(mx.nd.dot(x, mx.nd.ones((4, 4), dtype="float32")).sum().asscalar())


def mxnet_load_parameters_head_size():
    """A head saved for 3 classes loaded into a model built for 7."""
    import os
    import tempfile

    import mxnet as mx
    from mxnet.gluon import nn

    path = os.path.join(tempfile.mkdtemp(), "head.params")
    saved = nn.Dense(3, in_units=32)
    saved.initialize()
    saved(mx.nd.ones((1, 32)))
    saved.save_parameters(path)
    nn.Dense(7, in_units=32).load_parameters(path)


def mxnet_gpu_on_cpu_build():
    """A GPU asked of the CPU-only mxnet package."""
    import mxnet as mx

    print(mx.nd.zeros((1,), ctx=mx.gpu(0)).asnumpy())


def mxnet_missing_file_decoy():
    """A parameters file that does not exist: no GPU cause."""
    import mxnet as mx

    mx.nd.load("/nonexistent/model.params")


# ---------------------------------------------------------------- Lightning


def _pl():
    """Lightning 2's package, or the pytorch_lightning of 1.x."""
    try:
        import lightning.pytorch as pl
    except ImportError:
        import pytorch_lightning as pl
    return pl


def _fit(module, ckpt_path=None, **trainer_args):
    """Fits `module` for one step on the CPU, with the progress bar and the summary Lightning prints."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    pl = _pl()
    data = DataLoader(TensorDataset(torch.randn(16, 100), torch.randint(0, 3, (16,))), batch_size=8)
    args = dict(accelerator="cpu", max_steps=1, logger=False, enable_checkpointing=False)
    args.update(trainer_args)
    trainer = pl.Trainer(**args)
    trainer.fit(module, data, ckpt_path=ckpt_path)
    return trainer


def _classifier(features_in, classes, loss=None):
    import torch
    import torch.nn.functional as F

    pl = _pl()

    class Classifier(pl.LightningModule):
        def __init__(self, features_in=features_in, classes=classes):
            super().__init__()
            self.save_hyperparameters()
            self.head = torch.nn.Linear(features_in, classes)

        def training_step(self, batch, _):
            x, y = batch
            logits = self.head(x)
            return loss(logits, y) if loss else F.cross_entropy(logits, y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    return Classifier


def lightning_gpu_without_gpu():
    """A Trainer asked for a GPU on a machine with none."""
    _pl().Trainer(accelerator="gpu", devices=1)


def lightning_training_step_shape():
    """A head built for 784 features given batches of 100."""
    _fit(_classifier(784, 3)())


def lightning_checkpoint_head_size():
    """A checkpoint of a 3-class head loaded into a model built for 7 classes."""
    import os
    import tempfile

    model = _classifier(100, 3)
    path = os.path.join(tempfile.mkdtemp(), "head.ckpt")
    _fit(model()).save_checkpoint(path)
    model.load_from_checkpoint(path, classes=7)


def lightning_detect_anomaly_nan():
    """A loss whose backward is NaN (a square root of negatives), found by detect_anomaly."""
    import torch

    _fit(_classifier(100, 3, loss=lambda logits, y: torch.sqrt(logits - 1e3).mean())(), detect_anomaly=True)


def lightning_target_past_classes():
    """Labels up to 11 for a 3-class head (cross-entropy on the CPU)."""
    import torch.nn.functional as F

    _fit(_classifier(100, 3, loss=lambda logits, y: F.cross_entropy(logits, y + 9))())


def lightning_missing_checkpoint_decoy():
    """Resuming from a checkpoint path that does not exist: no GPU cause."""
    _fit(_classifier(100, 3)(), ckpt_path="/nonexistent/last.ckpt")


# ---------------------------------------------------------------- diffusers


# The size of every UNet built here: 16 x 16 samples, two blocks of one layer.
_SMALL_UNET = dict(sample_size=16, layers_per_block=1, block_out_channels=(32, 64), norm_num_groups=8)


def _unet(**config):
    """A small UNet2DModel built here (no download): 3 channels, two blocks, one with attention."""
    from diffusers import UNet2DModel

    base = dict(
        _SMALL_UNET,
        in_channels=3,
        out_channels=3,
        down_block_types=("DownBlock2D", "AttnDownBlock2D"),
        up_block_types=("AttnUpBlock2D", "UpBlock2D"),
    )
    base.update(config)
    return UNet2DModel(**base)


def diffusers_checkpoint_channels():
    """A UNet saved with 3 output channels loaded as one with 4."""
    import tempfile

    from diffusers import UNet2DModel

    path = tempfile.mkdtemp()
    _unet().save_pretrained(path)
    UNet2DModel.from_pretrained(path, out_channels=4)


def diffusers_sample_channels():
    """A UNet for 3-channel images given a 4-channel latent."""
    import torch

    _unet()(torch.randn(1, 4, 16, 16), timestep=1)


def diffusers_cross_attention_width():
    """A conditional UNet with a cross-attention width of 32 given text embeddings 64 wide."""
    import torch
    from diffusers import UNet2DConditionModel

    unet = UNet2DConditionModel(
        **_SMALL_UNET,
        in_channels=4,
        out_channels=4,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=32,
        attention_head_dim=8,
    )
    unet(torch.randn(1, 4, 16, 16), 1, encoder_hidden_states=torch.randn(1, 7, 64))


def diffusers_half_unet_float_sample():
    """A UNet cast to bfloat16 given a float32 sample."""
    import torch

    _unet().to(torch.bfloat16)(torch.randn(1, 3, 16, 16), timestep=1)


def diffusers_class_label_past_classes():
    """A class-conditional UNet for 10 classes given the label 12."""
    import torch

    _unet(num_class_embeds=10)(torch.randn(1, 3, 16, 16), timestep=1, class_labels=torch.tensor([12]))


def diffusers_unet_to_gpu_without_gpu():
    """A UNet moved to a GPU on a machine with none."""
    _unet().to("cuda")


def diffusers_missing_weights_decoy():
    """A folder with the model's config and no weights: no GPU cause."""
    import os
    import tempfile

    from diffusers import UNet2DModel

    path = tempfile.mkdtemp()
    _unet().save_config(path)
    assert os.path.exists(os.path.join(path, "config.json"))
    UNet2DModel.from_pretrained(path)


SHAPE, DTYPE, INDEX, NAN = "torch.shape_mismatch", "torch.dtype_mismatch", "cpu.index_error", "torch.nan_inf"

STEPS = {
    "tf_matmul_sizes": Step(tf_matmul_sizes, SHAPE, "high", "tensorflow"),
    "tf_add_incompatible_shapes": Step(tf_add_incompatible_shapes, SHAPE, "high", "tensorflow"),
    "tf_concat_dimensions": Step(tf_concat_dimensions, SHAPE, "high", "tensorflow"),
    "tf_reshape_values": Step(tf_reshape_values, SHAPE, "high", "tensorflow"),
    "keras_dense_input_width": Step(keras_dense_input_width, SHAPE, "high", "tensorflow"),
    "keras_loss_target_shape": Step(keras_loss_target_shape, SHAPE, "high", "tensorflow"),
    "tf_matmul_double_float": Step(tf_matmul_double_float, DTYPE, "high", "tensorflow"),
    "tf_add_int_float": Step(tf_add_int_float, DTYPE, "high", "tensorflow"),
    "tf_gather_past_dimension": Step(tf_gather_past_dimension, INDEX, "high", "tensorflow"),
    "keras_embedding_past_vocabulary": Step(keras_embedding_past_vocabulary, INDEX, "high", "tensorflow"),
    "keras_sparse_labels_past_classes": Step(keras_sparse_labels_past_classes, INDEX, "high", "tensorflow"),
    "tf_check_numerics_nan": Step(tf_check_numerics_nan, NAN, "high", "tensorflow"),
    "tf_missing_file_decoy": Step(tf_missing_file_decoy, "none", "-", "tensorflow"),
    "jax_dot_shapes": Step(jax_dot_shapes, SHAPE, "high", "jax"),
    "jax_add_incompatible_shapes": Step(jax_add_incompatible_shapes, SHAPE, "high", "jax"),
    "jax_reshape_size": Step(jax_reshape_size, SHAPE, "high", "jax"),
    "jax_lax_add_dtypes": Step(jax_lax_add_dtypes, DTYPE, "high", "jax"),
    "jax_debug_nans": Step(jax_debug_nans, NAN, "high", "jax"),
    "jax_gpu_on_cpu_build": Step(jax_gpu_on_cpu_build, "cuda.not_available", "high", "jax"),
    "jax_missing_file_decoy": Step(jax_missing_file_decoy, "none", "-", "jax"),
    "ort_input_float64": Step(ort_input_float64, DTYPE, "high", "onnxruntime"),
    "ort_input_width": Step(ort_input_width, SHAPE, "high", "onnxruntime"),
    "ort_matmul_dimensions": Step(ort_matmul_dimensions, SHAPE, "high", "onnxruntime"),
    "ort_gather_past_table": Step(ort_gather_past_table, INDEX, "high", "onnxruntime"),
    "ort_missing_model_decoy": Step(ort_missing_model_decoy, "none", "-", "onnxruntime"),
    "paddle_matmul_sizes": Step(paddle_matmul_sizes, SHAPE, "high", "paddle"),
    "paddle_add_incompatible_shapes": Step(paddle_add_incompatible_shapes, SHAPE, "high", "paddle"),
    "paddle_reshape_size": Step(paddle_reshape_size, SHAPE, "high", "paddle"),
    "paddle_linear_input_width": Step(paddle_linear_input_width, SHAPE, "high", "paddle"),
    "paddle_matmul_double_float": Step(paddle_matmul_double_float, DTYPE, "high", "paddle"),
    "paddle_embedding_past_vocabulary": Step(paddle_embedding_past_vocabulary, INDEX, "high", "paddle"),
    "paddle_cross_entropy_label_past_classes": Step(paddle_cross_entropy_label_past_classes, INDEX, "high", "paddle"),
    "paddle_check_nan_inf": Step(paddle_check_nan_inf, NAN, "high", "paddle"),
    "paddle_gpu_on_cpu_build": Step(paddle_gpu_on_cpu_build, "cuda.not_available", "high", "paddle"),
    "paddle_missing_file_decoy": Step(paddle_missing_file_decoy, "none", "-", "paddle"),
    "mxnet_dot_shapes": Step(mxnet_dot_shapes, SHAPE, "high", "mxnet"),
    "mxnet_add_incompatible_shapes": Step(mxnet_add_incompatible_shapes, SHAPE, "high", "mxnet"),
    "mxnet_concat_dimensions": Step(mxnet_concat_dimensions, SHAPE, "high", "mxnet"),
    "mxnet_dense_input_width": Step(mxnet_dense_input_width, SHAPE, "high", "mxnet"),
    "mxnet_dot_double_float": Step(mxnet_dot_double_float, DTYPE, "high", "mxnet"),
    "mxnet_load_parameters_head_size": Step(mxnet_load_parameters_head_size, "hf.checkpoint_size_mismatch", "high", "mxnet"),
    "mxnet_gpu_on_cpu_build": Step(mxnet_gpu_on_cpu_build, "cuda.not_available", "high", "mxnet"),
    "mxnet_missing_file_decoy": Step(mxnet_missing_file_decoy, "none", "-", "mxnet"),
    "lightning_gpu_without_gpu": Step(lightning_gpu_without_gpu, "cuda.not_available", "medium", "lightning"),
    "lightning_training_step_shape": Step(lightning_training_step_shape, SHAPE, "high", "lightning"),
    "lightning_checkpoint_head_size": Step(lightning_checkpoint_head_size, "hf.checkpoint_size_mismatch", "high", "lightning"),
    "lightning_detect_anomaly_nan": Step(lightning_detect_anomaly_nan, NAN, "high", "lightning"),
    "lightning_target_past_classes": Step(lightning_target_past_classes, INDEX, "high", "lightning"),
    "lightning_missing_checkpoint_decoy": Step(lightning_missing_checkpoint_decoy, "none", "-", "lightning"),
    "diffusers_checkpoint_channels": Step(diffusers_checkpoint_channels, "hf.checkpoint_size_mismatch", "high", "diffusers"),
    "diffusers_sample_channels": Step(diffusers_sample_channels, SHAPE, "high", "diffusers"),
    "diffusers_cross_attention_width": Step(diffusers_cross_attention_width, SHAPE, "high", "diffusers"),
    "diffusers_half_unet_float_sample": Step(diffusers_half_unet_float_sample, DTYPE, "high", "diffusers"),
    "diffusers_class_label_past_classes": Step(diffusers_class_label_past_classes, INDEX, "high", "diffusers"),
    "diffusers_unet_to_gpu_without_gpu": Step(diffusers_unet_to_gpu_without_gpu, "cuda.not_available", "high", "diffusers"),
    "diffusers_missing_weights_decoy": Step(diffusers_missing_weights_decoy, "none", "-", "diffusers"),
}


if __name__ == "__main__":
    from step_cli import main

    sys.exit(main(sys.argv, STEPS, lambda step: [step.expected, step.confidence, step.framework, *step.also]))
