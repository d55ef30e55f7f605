//! Shapes for graph inputs (`NAME=D0,D1,...`), set as the inputs' facts
//! before tract infers every other shape: how a symbolic dimension, such as
//! a batch size, gets its value.

use std::fmt;
use std::str::FromStr;

use tract_hir::infer::Factoid;
use tract_onnx::prelude::*;

use crate::{tract, ImportError};

/// The shape of one graph input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputShape {
    /// The graph input's name.
    pub name: String,
    /// Its dimensions, outermost first.
    pub dims: Vec<usize>,
}

/// An input shape that is not `NAME=D0,D1,...`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not NAME=D0,D1,... (positive dimensions)")]
pub struct BadInputShape(String);

impl FromStr for InputShape {
    type Err = BadInputShape;

    fn from_str(s: &str) -> Result<Self, BadInputShape> {
        let bad = || BadInputShape(s.to_string());
        let (name, dims) = s.rsplit_once('=').ok_or_else(bad)?;
        let dims = dims
            .split(',')
            .map(|d| d.trim().parse::<usize>().ok().filter(|&d| d > 0))
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(bad)?;
        if name.is_empty() {
            return Err(bad());
        }
        Ok(InputShape {
            name: name.to_string(),
            dims,
        })
    }
}

impl fmt::Display for InputShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dims: Vec<String> = self.dims.iter().map(ToString::to_string).collect();
        write!(f, "{}={}", self.name, dims.join(","))
    }
}

/// Sets each shape of `shapes` as its graph input's fact. A name that is no
/// graph input, a rank that differs or a fixed dimension that differs is
/// refused.
pub(crate) fn apply(model: &mut InferenceModel, shapes: &[InputShape]) -> Result<(), ImportError> {
    let inputs = model
        .input_outlets()
        .map_err(tract("graph inputs"))?
        .to_vec();
    let names: Vec<String> = inputs
        .iter()
        .map(|&o| {
            model
                .outlet_label(o)
                .unwrap_or(&model.node(o.node).name)
                .to_string()
        })
        .collect();
    for s in shapes {
        let err = |reason: String| ImportError::InputShape {
            input: s.name.clone(),
            reason,
        };
        let ix = names.iter().position(|n| *n == s.name).ok_or_else(|| {
            err(format!(
                "no such graph input (inputs: {})",
                names.join(", ")
            ))
        })?;
        let fact = model.input_fact(ix).map_err(tract("graph inputs"))?.clone();
        let rank = fact.shape.dims().count();
        if !fact.shape.is_open() && rank != s.dims.len() {
            return Err(err(format!(
                "{} dimensions given, the input has {rank}",
                s.dims.len()
            )));
        }
        for (i, (d, &want)) in fact.shape.dims().zip(&s.dims).enumerate() {
            match d.concretize().and_then(|d| d.as_i64()) {
                Some(have) if usize::try_from(have).ok() != Some(want) => {
                    return Err(err(format!(
                        "dimension {i} is {have} in the model, not {want}"
                    )))
                }
                _ => {}
            }
        }
        model
            .set_input_fact(ix, fact.with_shape(s.dims.clone()))
            .map_err(tract("input shape"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_shapes_parse_and_print() {
        let s: InputShape = "x=2,3, 8,8".parse().unwrap();
        assert_eq!(
            (s.name.as_str(), s.dims.as_slice()),
            ("x", &[2, 3, 8, 8][..])
        );
        assert_eq!(s.to_string(), "x=2,3,8,8");
        // Names may hold '=' themselves; the last one splits.
        let s: InputShape = "a=b=4".parse().unwrap();
        assert_eq!((s.name.as_str(), s.dims.as_slice()), ("a=b", &[4][..]));
        for bad in ["x", "=1", "x=", "x=1,,2", "x=0", "x=-1", "x=a"] {
            assert!(bad.parse::<InputShape>().is_err(), "{bad}");
        }
    }
}
