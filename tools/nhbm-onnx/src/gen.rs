//! Two small ONNX models built from tract's protobuf types, for tests and
//! the guest: a CNN (Conv, BatchNormalization, Relu, MaxPool, Add, Concat,
//! GlobalAveragePool, Reshape, Gemm, Dropout, Softmax) and a transformer
//! block (MatMul, Transpose, Softmax, Add, Sum, Relu, Reshape, Dropout, and a
//! ConstantOfShape whose value the importer must fold). Weights are
//! deterministic float32 values.

use tract_onnx::pb::tensor_proto::DataType;
use tract_onnx::pb::tensor_shape_proto::{dimension, Dimension};
use tract_onnx::pb::{
    type_proto, AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};

/// Deterministic float32 weights for initializer `name`: small values from
/// an xorshift seeded by the name.
pub fn weights(name: &str, n: usize) -> Vec<f32> {
    let mut x = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    }) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.2
        })
        .collect()
}

/// A float32 initializer with [`weights`].
fn init(name: &str, dims: &[i64]) -> TensorProto {
    let n = dims.iter().product::<i64>() as usize;
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: DataType::Float as i32,
        raw_data: weights(name, n)
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        ..Default::default()
    }
}

/// An int64 initializer (shapes).
fn init_i64(name: &str, values: &[i64]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: vec![values.len() as i64],
        data_type: DataType::Int64 as i32,
        raw_data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ..Default::default()
    }
}

/// A float32 graph input or output; `None` dimensions are symbolic.
pub fn value(name: &str, dims: &[Option<i64>]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| Dimension {
            value: Some(match d {
                Some(n) => dimension::Value::DimValue(*n),
                None => dimension::Value::DimParam("batch".into()),
            }),
            ..Default::default()
        })
        .collect();
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: DataType::Float as i32,
                shape: Some(TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn node(op: &str, inputs: &[&str], outputs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        name: outputs[0].to_string(),
        op_type: op.into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        attribute: attrs,
        ..Default::default()
    }
}

fn ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: 7, // INTS
        ints: v.to_vec(),
        ..Default::default()
    }
}

fn int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: 2, // INT
        i: v,
        ..Default::default()
    }
}

fn model(graph: GraphProto) -> ModelProto {
    ModelProto {
        ir_version: 8,
        producer_name: "nhbm-onnx".into(),
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 13,
        }],
        graph: Some(graph),
        ..Default::default()
    }
}

/// The CNN: input `x` [batch, 3, 8, 8] (batch `None` leaves it symbolic),
/// output `y` [batch, 10].
pub fn small_cnn(batch: Option<i64>) -> ModelProto {
    let pads = || ints("pads", &[1, 1, 1, 1]);
    let nodes = vec![
        node("Conv", &["x", "conv1.w", "conv1.b"], &["c1"], vec![pads()]),
        node(
            "BatchNormalization",
            &["c1", "bn.scale", "bn.bias", "bn.mean", "bn.var"],
            &["b1"],
            vec![],
        ),
        node("Relu", &["b1"], &["r1"], vec![]),
        node(
            "MaxPool",
            &["r1"],
            &["p1"],
            vec![ints("kernel_shape", &[2, 2]), ints("strides", &[2, 2])],
        ),
        node("Conv", &["p1", "conv2.w", "conv2.b"], &["c2"], vec![pads()]),
        node("Relu", &["c2"], &["r2"], vec![]),
        node("Add", &["r2", "p1"], &["res"], vec![]),
        node("Concat", &["res", "p1"], &["cat"], vec![int("axis", 1)]),
        node("GlobalAveragePool", &["cat"], &["gap"], vec![]),
        node("Reshape", &["gap", "flat.shape"], &["flat"], vec![]),
        node("Gemm", &["flat", "fc.w", "fc.b"], &["logits"], vec![]),
        node("Dropout", &["logits"], &["drop"], vec![]),
        node("Softmax", &["drop"], &["y"], vec![int("axis", 1)]),
    ];
    let initializer = vec![
        init("conv1.w", &[4, 3, 3, 3]),
        init("conv1.b", &[4]),
        init("bn.scale", &[4]),
        init("bn.bias", &[4]),
        init("bn.mean", &[4]),
        // variances must be positive
        TensorProto {
            raw_data: [1.0f32; 4].iter().flat_map(|v| v.to_le_bytes()).collect(),
            ..init("bn.var", &[4])
        },
        init("conv2.w", &[4, 4, 3, 3]),
        init("conv2.b", &[4]),
        init_i64("flat.shape", &[-1, 8]),
        init("fc.w", &[8, 10]),
        init("fc.b", &[10]),
    ];
    model(GraphProto {
        name: "small_cnn_onnx".into(),
        node: nodes,
        initializer,
        input: vec![value("x", &[batch, Some(3), Some(8), Some(8)])],
        output: vec![value("y", &[batch, Some(10)])],
        ..Default::default()
    })
}

/// The transformer block: input `x` [1, 16, 32], output `y` [1, 16, 32];
/// one attention head, a 64-wide MLP, residual connections.
pub fn transformer_block() -> ModelProto {
    let nodes = vec![
        node("Reshape", &["x", "tokens.shape"], &["h"], vec![]),
        // A bias computed from a shape: the importer folds it.
        node(
            "ConstantOfShape",
            &["tokens.shape"],
            &["pos"],
            vec![AttributeProto {
                name: "value".into(),
                r#type: 4, // TENSOR
                t: Some(TensorProto {
                    dims: vec![1],
                    data_type: DataType::Float as i32,
                    raw_data: 0.5f32.to_le_bytes().to_vec(),
                    ..Default::default()
                }),
                ..Default::default()
            }],
        ),
        node("Add", &["h", "pos"], &["h0"], vec![]),
        node("MatMul", &["h0", "wq"], &["q"], vec![]),
        node("MatMul", &["h0", "wk"], &["k"], vec![]),
        node("MatMul", &["h0", "wv"], &["v"], vec![]),
        node("Transpose", &["k"], &["kt"], vec![ints("perm", &[1, 0])]),
        node("MatMul", &["q", "kt"], &["scores"], vec![]),
        node("Softmax", &["scores"], &["probs"], vec![int("axis", 1)]),
        node("MatMul", &["probs", "v"], &["ctx"], vec![]),
        node("MatMul", &["ctx", "wo"], &["attn"], vec![]),
        node("Add", &["attn", "h0"], &["h1"], vec![]),
        node("MatMul", &["h1", "w1"], &["m1"], vec![]),
        node("Add", &["m1", "b1"], &["m1b"], vec![]),
        node("Relu", &["m1b"], &["m1r"], vec![]),
        node("MatMul", &["m1r", "w2"], &["m2"], vec![]),
        node("Sum", &["m2", "h1", "b2"], &["h2"], vec![]),
        node("Dropout", &["h2"], &["h2d"], vec![]),
        node("Reshape", &["h2d", "out.shape"], &["y"], vec![]),
    ];
    let initializer = vec![
        init_i64("tokens.shape", &[16, 32]),
        init_i64("out.shape", &[1, 16, 32]),
        init("wq", &[32, 32]),
        init("wk", &[32, 32]),
        init("wv", &[32, 32]),
        init("wo", &[32, 32]),
        init("w1", &[32, 64]),
        init("b1", &[64]),
        init("w2", &[64, 32]),
        init("b2", &[32]),
    ];
    model(GraphProto {
        name: "transformer_block_onnx".into(),
        node: nodes,
        initializer,
        input: vec![value("x", &[Some(1), Some(16), Some(32)])],
        output: vec![value("y", &[Some(1), Some(16), Some(32)])],
        ..Default::default()
    })
}
