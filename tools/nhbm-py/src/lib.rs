//! `nhbm._nhbm`, the extension module of the Python package `nhbm`: the
//! neuron_hbm planner for Python.
//!
//! A model (a description as `nhbm plan` reads it, or an ONNX file) is
//! planned by one of the planners of `nhbm-planner`, lowered to one mem_ref
//! plan per HBM memory and laid out as the blobs `NHBM_IOC_PLAN_LOAD` takes,
//! the same bytes `nhbm plan` writes. `validate` applies the kernel's
//! PLAN_LOAD rules to a blob (`nhbm::validate`).
//!
//! Errors become the exception classes of `nhbm._errors`; every call into
//! the Rust libraries runs under `catch_unwind`, so that a panic reaches
//! Python as `nhbm.NhbmError` rather than pyo3's `PanicException`.

use std::any::Any;
use std::collections::{BTreeMap, HashMap};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::Instant;

use nhbm::{Limits, Plan as BlobPlan, PlanError as BlobError};
use nhbm_onnx::{ImportError, ImportOptions, InputShape};
use nhbm_planner::desc::{Io, ModelDesc};
use nhbm_planner::planner::{kernel_bytes, memory_lower_bounds};
use nhbm_planner::{
    lower, plan_with_outcome, var_ids, ArenaRole, MemoryPlannerType, MemoryType, Model,
    PlannerOptions, Stop, Target,
};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

/// What went wrong, before it becomes a Python exception.
enum Error {
    /// A model description that does not make sense, or an ONNX model that
    /// does not import: `nhbm.ModelError`.
    Model(String),
    /// No plan within the model's constraints: `nhbm.PlannerError`.
    Planner(String),
    /// A blob the kernel would refuse: `nhbm.PlanError`.
    Plan(BlobError),
    /// A bad argument: `ValueError`.
    Value(String),
    /// A file that cannot be read: `OSError` (its subclass for the errno).
    Io(std::io::Error, PathBuf),
    /// A panic in the Rust libraries: `nhbm.NhbmError`.
    Internal(String),
}

type Result<T, E = Error> = std::result::Result<T, E>;

/// An instance of the exception class `class` of `nhbm._errors`, made with
/// `message` and the keyword arguments `kwargs`.
fn nhbm_error(
    py: Python<'_>,
    class: &str,
    message: String,
    kwargs: Option<Bound<'_, PyDict>>,
) -> PyErr {
    let made = py
        .import("nhbm._errors")
        .and_then(|m| m.getattr(class))
        .and_then(|c| c.call((message,), kwargs.as_ref()));
    match made {
        Ok(e) => PyErr::from_value(e),
        Err(e) => e,
    }
}

/// The keyword arguments of `nhbm.PlanError` for `e`.
fn plan_error_kwargs<'py>(py: Python<'py>, e: &BlobError) -> PyResult<Bound<'py, PyDict>> {
    let kw = PyDict::new(py);
    kw.set_item("errno", e.errno)?;
    kw.set_item("errno_name", nhbm::errno_name(e.errno))?;
    kw.set_item("record", e.record)?;
    kw.set_item("var_id", e.var_id)?;
    kw.set_item("rule", &e.rule)?;
    Ok(kw)
}

impl Error {
    /// The Python exception.
    fn into_py(self, py: Python<'_>) -> PyErr {
        match self {
            Error::Model(m) => nhbm_error(py, "ModelError", m, None),
            Error::Planner(m) => nhbm_error(py, "PlannerError", m, None),
            Error::Plan(e) => match plan_error_kwargs(py, &e) {
                Ok(kw) => nhbm_error(py, "PlanError", e.to_string(), Some(kw)),
                Err(err) => err,
            },
            Error::Value(m) => PyValueError::new_err(m),
            Error::Io(e, path) => {
                let errno = nhbm::io_errno(&e).unwrap_or(libc::EIO);
                // OSError(errno, strerror, filename) picks the subclass
                // (FileNotFoundError, PermissionError, ...).
                PyOSError::new_err((errno, e.to_string(), path.display().to_string()))
            }
            Error::Internal(m) => nhbm_error(py, "NhbmError", m, None),
        }
    }
}

/// `r` as a Python result.
fn py_result<T>(py: Python<'_>, r: Result<T>) -> PyResult<T> {
    r.map_err(|e| e.into_py(py))
}

/// The text of a panic's payload.
fn panic_text(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".into()
    }
}

/// Runs `f`, turning a panic into [`Error::Internal`] naming `what`.
fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| {
        Err(Error::Internal(format!(
            "internal error in {what}: {}",
            panic_text(p.as_ref())
        )))
    })
}

/// The target of arch `name` ("v2", "v3", "v4") with the module's default
/// parameters.
fn target(name: &str) -> Result<Target> {
    Target::for_arch_name(name).map_err(|e| Error::Value(e.to_string()))
}

/// The target of arch `arch`, V2 when none is named.
fn target_or_default(arch: Option<&str>) -> Result<Target> {
    arch.map_or_else(|| Ok(Target::default()), target)
}

/// The device-dependent limits of arch `name` ([`Limits::for_arch_name`]);
/// no arch checks only the rules every device shares.
fn limits(arch: Option<&str>) -> Result<Limits> {
    match arch {
        None => Ok(Limits::default()),
        Some(name) => Limits::for_arch_name(name)
            .ok_or_else(|| Error::Value(format!("unknown arch {name:?} (v2, v3, v4)"))),
    }
}

/// The ONNX import's error, with what to do about a symbolic dimension; an
/// input shape that does not fit the graph is a bad argument.
fn import_error(e: ImportError) -> Error {
    let inner = match &e {
        ImportError::File { error, .. } => error.as_ref(),
        other => other,
    };
    match inner {
        ImportError::InputShape { .. } => Error::Value(format!("input_shapes: {e}")),
        ImportError::DynamicShape { .. } => Error::Model(format!(
            "{e} (pass input_shapes={{name: [d0, d1, ...]}} to fix the graph inputs' dimensions)"
        )),
        _ => Error::Model(e.to_string()),
    }
}

/// Reads and checks the model description (JSON) at `path` for `target`;
/// data files are relative to its directory.
fn load_json(path: &Path, target: Target) -> Result<Model> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::Io(e, path.to_path_buf()))?;
    let desc: ModelDesc = serde_json::from_str(&text)
        .map_err(|e| Error::Model(format!("{}: {e}", path.display())))?;
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    guarded("the model check", || {
        Model::new_for(desc, base, target)
            .map_err(|e| Error::Model(format!("{}: {e}", path.display())))
    })
}

/// Imports the ONNX model at `path` for `target`, the graph inputs `shapes`
/// names given those dimensions (`nhbm_onnx::ImportOptions`).
fn load_onnx(
    path: &Path,
    shapes: Option<&BTreeMap<String, Vec<i64>>>,
    target: Target,
) -> Result<Model> {
    // Say which file is missing as Python does (FileNotFoundError).
    std::fs::metadata(path).map_err(|e| Error::Io(e, path.to_path_buf()))?;
    let mut input_shapes = Vec::new();
    for (name, dims) in shapes.into_iter().flatten() {
        let dims = dims
            .iter()
            .map(|&d| usize::try_from(d).ok().filter(|&d| d > 0))
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| {
                Error::Value(format!(
                    "input_shapes[{name:?}]: {dims:?} has a dimension that is not positive"
                ))
            })?;
        input_shapes.push(InputShape {
            name: name.clone(),
            dims,
        });
    }
    let opts = ImportOptions {
        input_shapes,
        target,
    };
    guarded("the ONNX import", || {
        nhbm_onnx::load_with(path, &opts).map_err(import_error)
    })
}

/// A checked model: tensors with sizes, alignments and lifetimes, the
/// device it is planned for by default.
///
/// Made by `nhbm.load_model` (a dict, a JSON model file or an ONNX file),
/// or by the static methods `from_dict`, `from_json` and `from_onnx`.
#[pyclass(module = "nhbm", name = "Model", frozen)]
struct PyModel {
    inner: Model,
}

#[pymethods]
impl PyModel {
    /// A model from a description in the schema of the JSON model files
    /// (`tools/examples/*.json`); `data_file` paths are relative to
    /// `base_dir` (default: the current directory). `arch` ("v2", "v3",
    /// "v4"; default v2) is the device it is checked and planned for.
    #[staticmethod]
    #[pyo3(signature = (desc, base_dir=None, arch=None))]
    fn from_dict(
        py: Python<'_>,
        desc: &Bound<'_, PyAny>,
        base_dir: Option<PathBuf>,
        arch: Option<&str>,
    ) -> PyResult<Self> {
        let target = py_result(py, target_or_default(arch))?;
        let text: String = py
            .import("json")?
            .call_method1("dumps", (desc,))?
            .extract()?;
        let base = base_dir.unwrap_or_else(|| PathBuf::from("."));
        let r = serde_json::from_str::<ModelDesc>(&text)
            .map_err(|e| Error::Model(format!("model description: {e}")))
            .and_then(|desc| {
                guarded("the model check", || {
                    Model::new_for(desc, base, target).map_err(|e| Error::Model(e.to_string()))
                })
            });
        py_result(py, r).map(|inner| PyModel { inner })
    }

    /// A model from a JSON model file; its `data_file` paths are relative to
    /// the file's directory. `arch` as for `from_dict`.
    #[staticmethod]
    #[pyo3(signature = (path, arch=None))]
    fn from_json(py: Python<'_>, path: PathBuf, arch: Option<&str>) -> PyResult<Self> {
        let target = py_result(py, target_or_default(arch))?;
        py_result(py, py.detach(|| load_json(&path, target))).map(|inner| PyModel { inner })
    }

    /// A model imported from an ONNX file through tract (shapes inferred,
    /// constant subgraphs folded, initializers as constants with their
    /// bytes). `input_shapes` gives graph inputs with symbolic dimensions
    /// fixed ones: `{"x": [1, 3, 224, 224]}`. `arch` as for `from_dict`.
    #[staticmethod]
    #[pyo3(signature = (path, input_shapes=None, arch=None))]
    fn from_onnx(
        py: Python<'_>,
        path: PathBuf,
        input_shapes: Option<BTreeMap<String, Vec<i64>>>,
        arch: Option<&str>,
    ) -> PyResult<Self> {
        let target = py_result(py, target_or_default(arch))?;
        py_result(
            py,
            py.detach(|| load_onnx(&path, input_shapes.as_ref(), target)),
        )
        .map(|inner| PyModel { inner })
    }

    /// The same model planned for arch `arch` ("v2", "v3", "v4") by default.
    fn for_arch(&self, py: Python<'_>, arch: &str) -> PyResult<Self> {
        let r = target(arch).and_then(|t| {
            guarded("the model check", || {
                self.inner
                    .for_target(t)
                    .map_err(|e| Error::Model(e.to_string()))
            })
        });
        py_result(py, r).map(|inner| PyModel { inner })
    }

    /// The model's name (the prefix of the plan files `nhbm plan` writes).
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// The description's line about the model, if it has one.
    #[getter]
    fn description(&self) -> Option<&str> {
        self.inner.desc.description.as_deref()
    }

    /// The planner the model asks for ("greedy" unless it says otherwise).
    #[getter]
    fn planner(&self) -> String {
        self.inner.desc.planner.to_string()
    }

    /// The device the model is planned for unless `plan` names an arch.
    #[getter]
    fn target(&self) -> &str {
        &self.inner.target.name
    }

    /// The tensor ids, in description order (var_id 1, 2, ...).
    #[getter]
    fn tensors(&self) -> Vec<String> {
        self.inner
            .tensors
            .iter()
            .map(|t| t.id().to_string())
            .collect()
    }

    /// The operator names, in execution order.
    #[getter]
    fn operators(&self) -> Vec<String> {
        self.inner
            .desc
            .operators
            .iter()
            .map(|o| o.name.clone())
            .collect()
    }

    /// The memories plans may use, in spill order ("hbm0", ...).
    #[getter]
    fn memories(&self) -> Vec<String> {
        self.inner
            .memories
            .iter()
            .map(|m| m.name.to_string())
            .collect()
    }

    /// The most bytes of scratch tensors live at any one operator: no
    /// placement of them takes less.
    #[getter]
    fn liveness_lower_bound(&self) -> u64 {
        self.inner.liveness_lower_bound()
    }

    /// The description as a dict, in the JSON model file schema (an ONNX
    /// model's constant bytes are not part of it).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let text = serde_json::to_string(&self.inner.desc)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        py.import("json")?.call_method1("loads", (text,))
    }

    fn __repr__(&self) -> String {
        format!(
            "<nhbm.Model {:?}: {} tensors, {} operators, target {}>",
            self.inner.name(),
            self.inner.tensors.len(),
            self.inner.desc.operators.len(),
            self.inner.target.name
        )
    }
}

/// Where one tensor was placed.
#[pyclass(module = "nhbm", name = "Placement", frozen, get_all)]
#[derive(Clone)]
struct PyPlacement {
    /// The tensor's id.
    tensor: String,
    /// Its var_id in the plan blobs (1-based description order).
    var_id: u32,
    /// The memory it is in ("hbm0", ...).
    memory: String,
    /// The memory its bytes come from (differs for staged constants).
    source_memory: String,
    /// The arena of `memory` the offset is in: "scratch", "persistent"
    /// (persistent tensors and graph inputs and outputs) or "constant".
    arena: String,
    /// "scratch", "persistent", "constant", "input" or "output".
    role: String,
    /// The tensor whose storage it shares, for a view.
    alias_of: Option<String>,
    /// Byte offset in its arena.
    offset: u64,
    /// Bytes.
    size: u64,
    /// Alignment of the slot.
    alignment: u64,
    /// The first and last operator (inclusive) it is live at; None for
    /// tensors no operator touches.
    lifetime: Option<(usize, usize)>,
}

#[pymethods]
impl PyPlacement {
    fn __repr__(&self) -> String {
        let life = self
            .lifetime
            .map_or("-".into(), |(a, b)| format!("{a}..{b}"));
        format!(
            "<nhbm.Placement {:?} {} {} arena +{:#x} size {} ops {life}>",
            self.tensor, self.memory, self.arena, self.offset, self.size
        )
    }
}

/// The plan of one HBM memory: its scratch arena against the lower bound,
/// where its tensors are, and the blob PLAN_LOAD takes.
#[pyclass(module = "nhbm", name = "MemoryResult", frozen)]
struct PyMemory {
    memory: String,
    channel: u32,
    high_water_mark: u64,
    lower_bound: u64,
    optimal: bool,
    search_nodes: Option<u64>,
    stopped: Option<String>,
    device_bytes: Option<u64>,
    records: usize,
    blob: Py<PyBytes>,
    placement: Vec<Py<PyPlacement>>,
}

#[pymethods]
impl PyMemory {
    /// The memory ("hbm0", ...).
    #[getter]
    fn memory(&self) -> &str {
        &self.memory
    }

    /// The HBM channel to load the blob on.
    #[getter]
    fn channel(&self) -> u32 {
        self.channel
    }

    /// Bytes of the scratch arena (the local scratchpad): its high-water mark.
    #[getter]
    fn high_water_mark(&self) -> u64 {
        self.high_water_mark
    }

    /// The most bytes of this memory's scratch tensors live at any one
    /// operator: no arena for them is smaller.
    #[getter]
    fn lower_bound(&self) -> u64 {
        self.lower_bound
    }

    /// Whether no smaller arena exists for these tensors: the exact planner
    /// proved it, or the arena is at the lower bound.
    #[getter]
    fn optimal(&self) -> bool {
        self.optimal
    }

    /// Search nodes the exact planner visited here (None for the others).
    #[getter]
    fn search_nodes(&self) -> Option<u64> {
        self.search_nodes
    }

    /// What stopped the exact planner's search here before a proof:
    /// "node_budget" (the same result on every machine) or "time_limit"
    /// (a result that depends on the machine's speed); None when it ended by
    /// itself, and for the other planners.
    #[getter]
    fn stopped(&self) -> Option<&str> {
        self.stopped.as_deref()
    }

    /// Bytes PLAN_LOAD allocates for the blob on an empty channel (its
    /// `bytes_allocated`), None if it fits in no region.
    #[getter]
    fn device_bytes(&self) -> Option<u64> {
        self.device_bytes
    }

    /// Records in the blob.
    #[getter]
    fn records(&self) -> usize {
        self.records
    }

    /// The plan blob, as `nhbm plan` writes it to PREFIX.MEMORY.plan.
    #[getter]
    fn blob(&self, py: Python<'_>) -> Py<PyBytes> {
        self.blob.clone_ref(py)
    }

    /// Tensor id -> placement, for the tensors in this memory.
    #[getter]
    fn placement<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        placement_dict(py, &self.placement)
    }

    fn __repr__(&self) -> String {
        format!(
            "<nhbm.MemoryResult {}: scratch {} (lower bound {}{}), {} records>",
            self.memory,
            self.high_water_mark,
            self.lower_bound,
            if self.optimal { ", optimal" } else { "" },
            self.records
        )
    }
}

/// `{tensor: placement}` of `items`.
fn placement_dict<'py>(py: Python<'py>, items: &[Py<PyPlacement>]) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for p in items {
        d.set_item(&p.get().tensor, p.clone_ref(py))?;
    }
    Ok(d)
}

/// A planned model: per memory its plan and blob, every tensor's placement.
#[pyclass(module = "nhbm", name = "PlanResult", frozen)]
struct PyPlan {
    model: String,
    planner: String,
    target: String,
    scratch_high_water_mark: u64,
    liveness_lower_bound: u64,
    planning_ms: f64,
    var_ids: BTreeMap<String, u32>,
    memories: Vec<Py<PyMemory>>,
    placement: Vec<Py<PyPlacement>>,
}

#[pymethods]
impl PyPlan {
    /// The model's name.
    #[getter]
    fn model(&self) -> &str {
        &self.model
    }

    /// The planner that made the plan.
    #[getter]
    fn planner(&self) -> &str {
        &self.planner
    }

    /// The arch the plan is for.
    #[getter]
    fn target(&self) -> &str {
        &self.target
    }

    /// Bytes of the scratch arenas together.
    #[getter]
    fn scratch_high_water_mark(&self) -> u64 {
        self.scratch_high_water_mark
    }

    /// The most bytes of scratch live at any one operator, over all memories.
    #[getter]
    fn liveness_lower_bound(&self) -> u64 {
        self.liveness_lower_bound
    }

    /// Milliseconds the planner took.
    #[getter]
    fn planning_ms(&self) -> f64 {
        self.planning_ms
    }

    /// Tensor id -> var_id in the blobs.
    #[getter]
    fn var_ids(&self) -> BTreeMap<String, u32> {
        self.var_ids.clone()
    }

    /// Memory ("hbm0", ...) -> its plan, for every memory with a tensor.
    #[getter]
    fn memories<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for m in &self.memories {
            d.set_item(&m.get().memory, m.clone_ref(py))?;
        }
        Ok(d)
    }

    /// Memory -> plan blob, the bytes `nhbm plan` writes.
    #[getter]
    fn blobs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for m in &self.memories {
            let m = m.get();
            d.set_item(&m.memory, m.blob.clone_ref(py))?;
        }
        Ok(d)
    }

    /// Tensor id -> placement, for every tensor.
    #[getter]
    fn placement<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        placement_dict(py, &self.placement)
    }

    /// Writes the blobs as `nhbm plan` does, one file per memory named
    /// PREFIX.MEMORY.plan (PREFIX: the model's name) in `directory`;
    /// returns the paths written.
    #[pyo3(signature = (prefix=None, directory=None))]
    fn write(
        &self,
        py: Python<'_>,
        prefix: Option<String>,
        directory: Option<PathBuf>,
    ) -> PyResult<Vec<String>> {
        let prefix = prefix.unwrap_or_else(|| self.model.clone());
        let dir = directory.unwrap_or_else(|| PathBuf::from("."));
        let mut written = Vec::new();
        for m in &self.memories {
            let m = m.get();
            let path = dir.join(format!("{prefix}.{}.plan", m.memory));
            let bytes = m.blob.bind(py).as_bytes();
            std::fs::write(&path, bytes).map_err(|e| Error::Io(e, path.clone()).into_py(py))?;
            written.push(path.display().to_string());
        }
        Ok(written)
    }

    fn __repr__(&self) -> String {
        format!(
            "<nhbm.PlanResult {:?} by {} for {}: scratch {} (lower bound {}), {} plans>",
            self.model,
            self.planner,
            self.target,
            self.scratch_high_water_mark,
            self.liveness_lower_bound,
            self.memories.len()
        )
    }
}

/// What `plan` computes before any Python object is made (with the GIL
/// released).
struct Planned {
    model: Model,
    kind: MemoryPlannerType,
    took: f64,
    mp: nhbm_planner::MemoryPlan,
    outcomes: Vec<nhbm_planner::ExactOutcome>,
    /// (memory, blob, records) per lowered plan.
    blobs: Vec<(MemoryType, Vec<u8>, usize)>,
}

/// Plans `model` with `kind` and `opts` for `arch`, and lays out the blobs.
fn run_plan(
    model: &Model,
    kind: Option<MemoryPlannerType>,
    opts: impl FnOnce(PlannerOptions) -> PlannerOptions,
    arch: Option<&str>,
) -> Result<Planned> {
    let model = match arch {
        Some(a) => {
            let t = target(a)?;
            guarded("the model check", || {
                model.for_target(t).map_err(|e| Error::Model(e.to_string()))
            })?
        }
        None => model.clone(),
    };
    let limits = limits(Some(&model.target.name)).unwrap_or_default();
    // The default is `nhbm plan`'s, whatever the description names.
    let kind = kind.unwrap_or(MemoryPlannerType::Exact);
    let opts = opts(model.desc.planner_options);
    guarded("the planner", || {
        let t0 = Instant::now();
        let (mp, outcomes) = plan_with_outcome(&model, kind, &opts)
            .map_err(|e| Error::Planner(format!("{}: {e}", model.name())))?;
        let took = t0.elapsed().as_secs_f64() * 1e3;
        let lowered =
            lower(&model, &mp).map_err(|e| Error::Model(format!("{}: {e}", model.name())))?;
        let blobs = lowered
            .iter()
            .map(|l| {
                let blob = l.plan.to_blob_for(&limits).map_err(Error::Plan)?;
                Ok((l.memory, blob, l.plan.records.len()))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Planned {
            model,
            kind,
            took,
            mp,
            outcomes,
            blobs,
        })
    })
}

/// "node_budget", "time_limit".
fn stop_name(s: Stop) -> String {
    match s {
        Stop::NodeBudget => "node_budget",
        Stop::TimeLimit => "time_limit",
    }
    .to_string()
}

/// "scratch", "persistent", "constant".
fn role_name(r: ArenaRole) -> &'static str {
    match r {
        ArenaRole::Scratch => "scratch",
        ArenaRole::Persistent => "persistent",
        ArenaRole::Constant => "constant",
    }
}

/// The Python objects of a plan.
fn plan_objects(py: Python<'_>, p: Planned) -> PyResult<PyPlan> {
    let model = &p.model;
    let ids = var_ids(model);
    let mut by_memory: HashMap<MemoryType, Vec<Py<PyPlacement>>> = HashMap::new();
    let mut placement = Vec::with_capacity(model.tensors.len());
    for t in &model.tensors {
        let a = model_alloc(&p.mp, t.id()).map_err(|e| e.into_py(py))?;
        let item = Py::new(py, placement_of(t, a, ids[t.id()]))?;
        by_memory
            .entry(a.memory)
            .or_default()
            .push(item.clone_ref(py));
        placement.push(item);
    }
    let bounds = memory_lower_bounds(model, &p.mp);
    let mut memories = Vec::with_capacity(p.blobs.len());
    for (m, blob, records) in &p.blobs {
        let hwm = p.mp.arena_usages.get(m).map_or(0, |a| a.total_size);
        let lb = bounds.get(m).copied().unwrap_or(0);
        let outcome = p.outcomes.iter().find(|o| o.memory == *m);
        memories.push(Py::new(
            py,
            PyMemory {
                memory: m.to_string(),
                channel: m.channel().unwrap_or(0),
                high_water_mark: hwm,
                lower_bound: lb,
                optimal: outcome.is_some_and(|o| o.optimal) || hwm <= lb,
                search_nodes: outcome.map(|o| o.nodes),
                stopped: outcome.and_then(|o| o.stopped).map(stop_name),
                device_bytes: kernel_bytes(model, &p.mp, *m),
                records: *records,
                blob: PyBytes::new(py, blob).unbind(),
                placement: by_memory.remove(m).unwrap_or_default(),
            },
        )?);
    }
    Ok(PyPlan {
        model: model.name().to_string(),
        planner: p.kind.to_string(),
        target: model.target.name.clone(),
        scratch_high_water_mark: p.mp.scratch_high_water_mark(),
        liveness_lower_bound: model.liveness_lower_bound(),
        planning_ms: p.took,
        var_ids: ids,
        memories,
        placement,
    })
}

/// The placement of tensor `t`, allocated as `a`, var_id `var_id`.
fn placement_of(
    t: &nhbm_planner::desc::Tensor,
    a: &nhbm_planner::TensorAllocation,
    var_id: u32,
) -> PyPlacement {
    let b = a.binding;
    let role = match t.desc.io {
        Some(Io::Input) => "input",
        Some(Io::Output) => "output",
        None => role_name(t.desc.role),
    };
    PyPlacement {
        tensor: t.id().to_string(),
        var_id,
        memory: a.memory.to_string(),
        source_memory: b.map_or(a.memory, |b| b.source_memory).to_string(),
        arena: role_name(b.map_or(ArenaRole::Scratch, |b| b.role)).to_string(),
        role: role.to_string(),
        alias_of: t.desc.alias_of.clone(),
        offset: a.offset,
        size: a.size,
        alignment: a.alignment,
        lifetime: t.lifetime.as_ref().map(|l| (l.start_op, l.end_op)),
    }
}

/// The allocation of tensor `id` in `mp`.
fn model_alloc<'a>(
    mp: &'a nhbm_planner::MemoryPlan,
    id: &str,
) -> Result<&'a nhbm_planner::TensorAllocation> {
    mp.get_allocation(id)
        .map_err(|e| Error::Internal(format!("internal error: {e}")))
}

/// Plans `model` (an `nhbm.Model`); see `nhbm.plan`.
#[pyfunction]
#[pyo3(signature = (model, planner=None, budget=None, arch=None, seed=None, iterations=None, max_stall_iterations=None, time_limit_ms=None))]
#[allow(clippy::too_many_arguments)]
fn plan(
    py: Python<'_>,
    model: &Bound<'_, PyModel>,
    planner: Option<&str>,
    budget: Option<u64>,
    arch: Option<&str>,
    seed: Option<u64>,
    iterations: Option<u32>,
    max_stall_iterations: Option<u32>,
    time_limit_ms: Option<u64>,
) -> PyResult<PyPlan> {
    let kind = planner
        .map(|p| p.parse::<MemoryPlannerType>())
        .transpose()
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let options = move |mut o: PlannerOptions| {
        if let Some(b) = budget {
            o.node_budget = b;
        }
        if let Some(t) = time_limit_ms {
            o.time_budget_ms = t;
        }
        if let Some(s) = seed {
            o.seed = s;
        }
        if let Some(i) = iterations {
            o.iterations = i;
        }
        if let Some(m) = max_stall_iterations {
            o.max_stall_iterations = m;
        }
        o
    };
    let m = &model.get().inner;
    let arch = arch.map(str::to_string);
    let planned = py.detach(|| run_plan(m, kind, options, arch.as_deref()));
    let planned = py_result(py, planned)?;
    plan_objects(py, planned)
}

/// What `validate` says of a blob the kernel would take.
#[pyclass(module = "nhbm", name = "BlobSummary", frozen, get_all)]
struct PyBlobSummary {
    /// Records in the plan.
    records: usize,
    /// Bytes of the blob.
    blob_bytes: usize,
    /// Bytes of the local scratchpad.
    local_scratchpad_size: u64,
    /// Bytes of the shared scratchpad.
    shared_scratchpad_size: u64,
    /// Each record's var_id, in blob order.
    var_ids: Vec<u32>,
    /// Each record's kind ("MR_INPUT", "MR_VIRTUAL_TMP_BUF", ...).
    kinds: Vec<String>,
    /// Each record's name, if it has one.
    names: Vec<Option<String>>,
}

#[pymethods]
impl PyBlobSummary {
    fn __repr__(&self) -> String {
        format!(
            "<nhbm.BlobSummary {} records, {} bytes, local scratchpad {}>",
            self.records, self.blob_bytes, self.local_scratchpad_size
        )
    }
}

/// Checks a plan blob against the rules PLAN_LOAD applies; see
/// `nhbm.validate`.
#[pyfunction]
#[pyo3(signature = (blob, arch=None))]
fn validate(py: Python<'_>, blob: &[u8], arch: Option<&str>) -> PyResult<PyBlobSummary> {
    let r = limits(arch).and_then(|l| {
        guarded("the blob check", || {
            BlobPlan::from_blob_for(blob, &l).map_err(Error::Plan)
        })
    });
    let plan = py_result(py, r)?;
    Ok(PyBlobSummary {
        records: plan.records.len(),
        blob_bytes: blob.len(),
        local_scratchpad_size: plan.local_scratchpad_size,
        shared_scratchpad_size: plan.shared_scratchpad_size,
        var_ids: plan.records.iter().map(|r| r.var_id).collect(),
        kinds: plan
            .records
            .iter()
            .map(|r| nhbm::validate::mr_type_name(r.mr_type()))
            .collect(),
        names: plan.records.iter().map(|r| r.name.clone()).collect(),
    })
}

/// The extension module.
#[pymodule]
fn _nhbm(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add(
        "PLANNERS",
        ("greedy", "greedy_by_size", "hill_climb", "exact"),
    )?;
    m.add("ARCHES", ("v2", "v3", "v4"))?;
    m.add_class::<PyModel>()?;
    m.add_class::<PyPlan>()?;
    m.add_class::<PyMemory>()?;
    m.add_class::<PyPlacement>()?;
    m.add_class::<PyBlobSummary>()?;
    m.add_function(wrap_pyfunction!(plan, m)?)?;
    m.add_function(wrap_pyfunction!(validate, m)?)?;
    Ok(())
}
