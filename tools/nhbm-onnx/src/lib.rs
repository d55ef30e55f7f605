//! ONNX models in, planner models out.
//!
//! tract reads the file, infers every shape and folds constant subgraphs
//! (`into_typed`: a node whose value inference already knows, such as a
//! ConstantOfShape of a constant shape, becomes a constant). Each node of the
//! typed model, in tract's evaluation order, becomes one operator; its
//! outputs are tensors: constants (initializers and folded values) with
//! their bytes as payload, graph inputs and outputs as MR_INPUT/MR_OUTPUT,
//! everything else scratch with a lifetime from the operators that define
//! and use it.
//!
//! Graph inputs with symbolic dimensions (a batch size) get their shapes
//! from [`ImportOptions::input_shapes`] before shape inference.

pub mod gen;
mod input_shape;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use nhbm_planner::desc::{Io, ModelDesc, OperatorDesc, Platform, TensorDesc};
use nhbm_planner::{ArenaRole, MemoryPlannerType, Model, ModelError, PlannerOptions, Target};
use tract_onnx::pb::ModelProto;
use tract_onnx::prelude::*;
use tract_onnx::tract_core::ops::konst::Const;

pub use input_shape::{BadInputShape, InputShape};

/// How a model is imported: the shapes of graph inputs, and the device it is
/// planned for.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// Shapes for graph inputs, by name; needed where an input has a
    /// symbolic dimension.
    pub input_shapes: Vec<InputShape>,
    /// The device the model is checked and planned for.
    pub target: Target,
}

/// Why an ONNX model does not import.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The file named, and what went wrong with it.
    #[error("{}: {error}", path.display())]
    File {
        /// The ONNX file.
        path: PathBuf,
        /// What went wrong.
        error: Box<ImportError>,
    },
    /// tract could not read the model or infer its shapes.
    #[error("{what}: {message}")]
    Tract {
        /// The step that failed.
        what: &'static str,
        /// tract's error chain, on one line.
        message: String,
    },
    /// A tensor whose shape is not known after shape inference.
    #[error("tensor {tensor:?}: shape {shape} stays dynamic{hint}")]
    DynamicShape {
        /// The tensor.
        tensor: String,
        /// Its shape, with the symbols left.
        shape: String,
        /// What to do about it, if anything.
        hint: &'static str,
    },
    /// A tensor of an element type the planner has no size for.
    #[error("tensor {tensor:?}: element type {dtype} is not supported")]
    ElementType {
        /// The tensor.
        tensor: String,
        /// Its element type.
        dtype: String,
    },
    /// A tensor whose size in bytes does not fit in 64 bits.
    #[error("tensor {0:?}: size overflows")]
    Overflow(String),
    /// A tensor with no elements.
    #[error("tensor {0:?}: has no elements")]
    Empty(String),
    /// An input shape given that does not fit the graph.
    #[error("input shape {input}: {reason}")]
    InputShape {
        /// The input named.
        input: String,
        /// Why it does not fit.
        reason: String,
    },
    /// The imported description does not make a model.
    #[error(transparent)]
    Model(#[from] ModelError),
}

/// Turns tract's error of step `what` into an [`ImportError`].
pub(crate) fn tract(what: &'static str) -> impl Fn(TractError) -> ImportError {
    move |e| ImportError::Tract {
        what,
        message: format!("{e:#}"),
    }
}

/// Reads an ONNX file into a planner model named after the file.
pub fn load(path: &Path) -> Result<Model, ImportError> {
    load_with(path, &ImportOptions::default())
}

/// Reads an ONNX file into a planner model named after the file, with
/// `opts`' input shapes, for its target.
pub fn load_with(path: &Path, opts: &ImportOptions) -> Result<Model, ImportError> {
    let name = path
        .file_stem()
        .map_or("model".into(), |s| s.to_string_lossy().into_owned());
    tract_onnx::onnx()
        .model_for_path(path)
        .map_err(tract("read"))
        .and_then(|inference| {
            import(
                &name,
                inference,
                path.parent().map(Path::to_path_buf).unwrap_or_default(),
                opts,
            )
        })
        .map_err(|e| ImportError::File {
            path: path.to_path_buf(),
            error: Box::new(e),
        })
}

/// Imports an ONNX model held in memory.
pub fn from_proto(name: &str, proto: &ModelProto) -> Result<Model, ImportError> {
    from_proto_with(name, proto, &ImportOptions::default())
}

/// Imports an ONNX model held in memory, with `opts`' input shapes, for its
/// target.
pub fn from_proto_with(
    name: &str,
    proto: &ModelProto,
    opts: &ImportOptions,
) -> Result<Model, ImportError> {
    let inference = tract_onnx::onnx()
        .model_for_proto_model(proto)
        .map_err(tract("read"))?;
    import(name, inference, PathBuf::from("."), opts)
}

/// The planner's name of a tract element type, and its size in bytes.
fn dtype(t: DatumType) -> Option<(&'static str, u64)> {
    Some(match t {
        DatumType::Bool => ("bool", 1),
        DatumType::U8 => ("uint8", 1),
        DatumType::I8 => ("int8", 1),
        DatumType::U16 => ("uint16", 2),
        DatumType::I16 => ("int16", 2),
        DatumType::F16 => ("float16", 2),
        DatumType::U32 => ("uint32", 4),
        DatumType::I32 => ("int32", 4),
        DatumType::F32 => ("float32", 4),
        DatumType::U64 => ("uint64", 8),
        DatumType::I64 => ("int64", 8),
        DatumType::F64 => ("float64", 8),
        _ => return None,
    })
}

/// Imports a model tract has read: the input shapes of `opts` applied,
/// every graph input checked to be fixed, then the typed graph described.
fn import(
    name: &str,
    mut inference: InferenceModel,
    base_dir: PathBuf,
    opts: &ImportOptions,
) -> Result<Model, ImportError> {
    input_shape::apply(&mut inference, &opts.input_shapes)?;
    check_graph_inputs(&inference)?;
    let typed = inference.into_typed().map_err(tract("shape inference"))?;
    let graph = describe(&typed)?;
    let desc = ModelDesc {
        name: name.to_string(),
        description: Some("imported from ONNX".into()),
        memories: Vec::new(),
        platform: Platform::default(),
        planner: MemoryPlannerType::default(),
        planner_options: PlannerOptions::default(),
        tensors: graph.tensors,
        operators: graph.operators,
    };
    Ok(Model::new_for(desc, base_dir, opts.target.clone())?.with_payloads(graph.payloads)?)
}

/// A graph input with a symbolic dimension would otherwise be reported by
/// the first operator that needs it; name the input instead.
fn check_graph_inputs(inference: &InferenceModel) -> Result<(), ImportError> {
    for &o in inference.input_outlets().map_err(tract("graph inputs"))? {
        let fact = inference.outlet_fact(o).map_err(tract("graph inputs"))?;
        let label = inference
            .outlet_label(o)
            .unwrap_or(&inference.node(o.node).name);
        if !matches!(fact.shape.as_concrete_finite(), Ok(Some(_))) {
            return Err(ImportError::DynamicShape {
                tensor: label.to_string(),
                shape: format!("{:?}", fact.shape),
                hint: "; give the graph input fixed dimensions",
            });
        }
    }
    Ok(())
}

/// tract's name of outlet `o`: its label, else its node's name, with the
/// slot where the node has several outputs.
fn raw_name(typed: &TypedModel, o: OutletId) -> String {
    if let Some(l) = typed.outlet_label(o) {
        return l.to_string();
    }
    let n = &typed.node(o.node).name;
    if typed.node(o.node).outputs.len() == 1 {
        n.clone()
    } else {
        format!("{n}:{}", o.slot)
    }
}

/// The tensor names of the outputs of the nodes in `order`. tract names a
/// constant it made of an initializer or a folded node `NAME.0`; give it
/// back the ONNX name where that is free.
fn tensor_namer<'a>(typed: &'a TypedModel, order: &[usize]) -> impl Fn(OutletId) -> String + 'a {
    let taken: std::collections::HashSet<String> = order
        .iter()
        .flat_map(|&n| (0..typed.node(n).outputs.len()).map(move |s| OutletId::new(n, s)))
        .map(|o| raw_name(typed, o))
        .collect();
    move |o: OutletId| -> String {
        let raw = raw_name(typed, o);
        match raw.strip_suffix(".0") {
            Some(base) if typed.node(o.node).op_is::<Const>() && !taken.contains(base) => {
                base.to_string()
            }
            _ => raw,
        }
    }
}

/// The planner's view of a typed graph: its tensors, its operators in
/// evaluation order, and the constants' bytes by tensor.
struct Described {
    tensors: Vec<TensorDesc>,
    operators: Vec<OperatorDesc>,
    payloads: HashMap<String, Vec<u8>>,
}

/// Each node of `typed`, in evaluation order, as one operator (constants
/// and graph inputs excepted) defining one tensor per output.
fn describe(typed: &TypedModel) -> Result<Described, ImportError> {
    let inputs = typed
        .input_outlets()
        .map_err(tract("graph inputs"))?
        .to_vec();
    let outputs = typed
        .output_outlets()
        .map_err(tract("graph outputs"))?
        .to_vec();
    let order = typed.eval_order().map_err(tract("evaluation order"))?;
    let tensor_name = tensor_namer(typed, &order);

    let mut tensors = Vec::new();
    let mut operators = Vec::new();
    let mut payloads = HashMap::new();
    let mut ids: HashMap<OutletId, String> = HashMap::new();
    for &n in &order {
        let node = typed.node(n);
        let konst = node.op_as::<Const>();
        let is_source = inputs.iter().any(|o| o.node == n);
        for (slot, out) in node.outputs.iter().enumerate() {
            let outlet = OutletId::new(n, slot);
            let id = tensor_name(outlet);
            let io = if is_source {
                Some(Io::Input)
            } else if outputs.contains(&outlet) {
                Some(Io::Output)
            } else {
                None
            };
            let (tensor, payload) = output_tensor(id.clone(), &out.fact, io, konst)?;
            if let Some(bytes) = payload {
                payloads.insert(id.clone(), bytes);
            }
            tensors.push(tensor);
            ids.insert(outlet, id);
        }
        if konst.is_some() || is_source {
            continue;
        }
        operators.push(OperatorDesc {
            name: format!("{} ({})", node.name, node.op.name()),
            uses: node.inputs.iter().map(|i| ids[i].clone()).collect(),
            defines: (0..node.outputs.len())
                .map(|s| ids[&OutletId::new(n, s)].clone())
                .collect(),
            duration: None,
        });
    }
    Ok(Described {
        tensors,
        operators,
        payloads,
    })
}

/// The tensor `id` of an output whose fact is `fact`, `io` when it is a
/// graph input or output, `konst` when its node is a constant: its
/// description, and its bytes when it is a constant. Fails on a shape that
/// stays dynamic, an element type without a size, and a size that
/// overflows or is zero.
fn output_tensor(
    id: String,
    fact: &TypedFact,
    io: Option<Io>,
    konst: Option<&Const>,
) -> Result<(TensorDesc, Option<Vec<u8>>), ImportError> {
    let Some(shape) = fact.shape.as_concrete() else {
        return Err(ImportError::DynamicShape {
            tensor: id,
            shape: format!("{:?}", fact.shape),
            hint: " after shape inference",
        });
    };
    let Some((dt, elem)) = dtype(fact.datum_type) else {
        return Err(ImportError::ElementType {
            tensor: id,
            dtype: format!("{:?}", fact.datum_type),
        });
    };
    let size = shape
        .iter()
        .try_fold(elem, |acc, &d| acc.checked_mul(d as u64))
        .ok_or_else(|| ImportError::Overflow(id.clone()))?;
    if size == 0 {
        return Err(ImportError::Empty(id));
    }
    let role = if konst.is_some() && io.is_none() {
        ArenaRole::Constant
    } else {
        ArenaRole::Scratch
    };
    let payload = match (konst, role) {
        (Some(c), ArenaRole::Constant) => Some(c.val().as_bytes().to_vec()),
        _ => None,
    };
    let shape_desc = (shape.len() <= 8).then(|| shape.iter().map(|&d| d as u64).collect());
    let tensor = TensorDesc {
        dtype: shape_desc.as_ref().map(|_| dt.to_string()),
        shape: shape_desc,
        role,
        io,
        ..TensorDesc::scratch(id, size)
    };
    Ok((tensor, payload))
}
