//! ONNX import: the generated CNN and transformer block import with their
//! weights as payloads, plan with every planner, lower, and a dynamic shape
//! is refused by name.

use nhbm::Kind;
use nhbm_onnx::gen;
use nhbm_planner::desc::Io;
use nhbm_planner::planner::overlapping_pairs;
use nhbm_planner::*;
use prost::Message;
use tract_onnx::pb::ModelProto;

const PLANNERS: [MemoryPlannerType; 4] = [
    MemoryPlannerType::Greedy,
    MemoryPlannerType::GreedyBySize,
    MemoryPlannerType::HillClimb,
    MemoryPlannerType::Exact,
];

/// Every initializer's name and raw bytes.
fn initializers(p: &ModelProto) -> Vec<(String, Vec<u8>)> {
    p.graph
        .as_ref()
        .unwrap()
        .initializer
        .iter()
        .map(|t| (t.name.clone(), t.raw_data.clone()))
        .collect()
}

/// Plans with every planner, lowers, and checks that each initializer of
/// `weights` reaches a plan record byte for byte.
fn plans_and_lowers(m: &Model, proto: &ModelProto, weights: &[&str]) {
    for k in PLANNERS {
        let mp = plan(m, k, &PlannerOptions::default()).unwrap_or_else(|e| panic!("{k}: {e}"));
        assert!(overlapping_pairs(m, &mp).is_empty(), "{k}");
        assert!(mp.scratch_high_water_mark() >= m.liveness_lower_bound());
        let lowered = lower(m, &mp).unwrap();
        for (name, bytes) in initializers(proto)
            .iter()
            .filter(|(n, _)| weights.contains(&n.as_str()))
        {
            let rec = lowered
                .iter()
                .flat_map(|l| &l.plan.records)
                .find(|r| r.name.as_deref() == Some(name.as_str()))
                .unwrap_or_else(|| panic!("{k}: no record for {name}"));
            assert_eq!(&rec.data, bytes, "{k}: {name}");
            assert!(
                matches!(rec.kind, Kind::Buffer | Kind::BufferStaged),
                "{name}: {:?}",
                rec.kind
            );
        }
        for l in &lowered {
            l.plan.to_blob().expect("a valid plan blob");
        }
    }
}

#[test]
fn small_cnn_imports_with_its_weights() {
    let proto = gen::small_cnn(Some(1));
    let m = nhbm_onnx::from_proto("small_cnn_onnx", &proto).unwrap();
    let ops: Vec<&str> = m.desc.operators.iter().map(|o| o.name.as_str()).collect();
    // tract's typed operators: BatchNormalization becomes Mul + Add, Relu
    // Max, GlobalAveragePool Reduce + Div, Reshape RmAxis, Gemm EinSum.
    for op in [
        "Conv", "Mul", "Max", "MaxPool", "Add", "Concat", "Reduce", "RmAxis", "EinSum", "Dropout",
        "Softmax",
    ] {
        assert!(
            ops.iter().any(|o| o.contains(op)),
            "{op} missing in {ops:?}"
        );
    }
    let x = m.tensor("x").unwrap();
    assert_eq!((x.desc.io, x.size), (Some(Io::Input), 3 * 8 * 8 * 4));
    let y = m.tensor("y").unwrap();
    assert_eq!((y.desc.io, y.size), (Some(Io::Output), 10 * 4));
    let w = m.tensor("conv1.w").unwrap();
    assert_eq!(w.desc.role, ArenaRole::Constant);
    assert_eq!(w.desc.shape.as_deref(), Some(&[4u64, 3, 3, 3][..]));
    assert_eq!(m.constant_bytes(w).unwrap().len(), 4 * 27 * 4);
    // Intermediate shapes were inferred: conv output 4x8x8, pool 4x4x4.
    assert_eq!(m.tensor("c1").unwrap().size, 4 * 64 * 4);
    assert_eq!(m.tensor("p1").unwrap().size, 4 * 16 * 4);
    assert!(m.liveness_lower_bound() > 0);
    plans_and_lowers(
        &m,
        &proto,
        &["conv1.w", "conv1.b", "conv2.w", "conv2.b", "fc.w"],
    );
}

#[test]
fn transformer_block_imports_and_folds_constant_of_shape() {
    let proto = gen::transformer_block();
    let m = nhbm_onnx::from_proto("transformer_block_onnx", &proto).unwrap();
    let ops: Vec<&str> = m.desc.operators.iter().map(|o| o.name.as_str()).collect();
    assert!(
        !ops.iter().any(|o| o.contains("ConstantOfShape")),
        "{ops:?}"
    );
    // The folded value is a constant of 16 x 32 halves.
    let half: Vec<u8> = (0..16 * 32).flat_map(|_| 0.5f32.to_le_bytes()).collect();
    let folded = m
        .tensors
        .iter()
        .filter(|t| t.desc.role == ArenaRole::Constant)
        .find(|t| m.constant_bytes(t).unwrap() == half);
    assert!(folded.is_some(), "no folded constant");
    assert_eq!(m.tensor("scores").unwrap().size, 16 * 16 * 4);
    assert_eq!(m.tensor("m1").unwrap().size, 16 * 64 * 4);
    let weights = ["wq", "wk", "wv", "wo", "w1", "b1", "w2", "b2"];
    plans_and_lowers(&m, &proto, &weights);
}

#[test]
fn a_dynamic_shape_is_refused_by_name() {
    let e = nhbm_onnx::from_proto("dyn", &gen::small_cnn(None)).unwrap_err();
    assert!(
        matches!(&e, nhbm_onnx::ImportError::DynamicShape { tensor, .. } if tensor == "x"),
        "{e}"
    );
    assert!(e.to_string().contains("dynamic"), "{e}");
}

#[test]
fn files_load_from_disk() {
    let dir = std::env::temp_dir().join(format!("nhbm-onnx-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tb.onnx");
    std::fs::write(&path, gen::transformer_block().encode_to_vec()).unwrap();
    let m = nhbm_onnx::load(&path).unwrap();
    assert_eq!(m.name(), "tb");
    std::fs::write(dir.join("bad.onnx"), b"not a model").unwrap();
    let e = nhbm_onnx::load(&dir.join("bad.onnx")).unwrap_err();
    assert!(e.to_string().contains("bad.onnx"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The CNN's batch dimension is symbolic; `x=2,3,8,8` gives it, and every
/// size follows.
#[test]
fn input_shapes_fix_a_symbolic_dimension() {
    let proto = gen::small_cnn(None);
    let shapes = |s: &[&str]| nhbm_onnx::ImportOptions {
        input_shapes: s.iter().map(|s| s.parse().unwrap()).collect(),
        ..Default::default()
    };
    let m = nhbm_onnx::from_proto_with("dyn", &proto, &shapes(&["x=2,3,8,8"])).unwrap();
    assert_eq!(m.tensor("x").unwrap().size, 2 * 3 * 8 * 8 * 4);
    assert_eq!(m.tensor("y").unwrap().size, 2 * 10 * 4);
    assert_eq!(m.tensor("c1").unwrap().size, 2 * 4 * 64 * 4);
    let one = nhbm_onnx::from_proto("one", &gen::small_cnn(Some(1))).unwrap();
    assert!(m.liveness_lower_bound() > one.liveness_lower_bound());
    plans_and_lowers(&m, &proto, &["conv1.w", "fc.w"]);
    for (bad, why) in [
        ("nosuch=1,3,8,8", "no such graph input (inputs: x)"),
        ("x=2,3,8", "3 dimensions given, the input has 4"),
        ("x=2,4,8,8", "dimension 1 is 3 in the model, not 4"),
    ] {
        let e = nhbm_onnx::from_proto_with("dyn", &proto, &shapes(&[bad])).unwrap_err();
        assert!(e.to_string().contains(why), "{bad}: {e}");
    }
}

/// A model is checked against the target it is imported for: on V3 its
/// default memories are V3's four channels.
#[test]
fn imports_check_the_model_for_their_target() {
    let opts = nhbm_onnx::ImportOptions {
        target: Target::for_arch_name("v3").unwrap(),
        ..Default::default()
    };
    let m = nhbm_onnx::from_proto_with("tb", &gen::transformer_block(), &opts).unwrap();
    assert_eq!(m.memories.len(), 4);
    assert_eq!(m.target.name, "v3");
}
