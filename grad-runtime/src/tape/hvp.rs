//! `Tape::hvp`: Hessian-vector products. The gradient recorded as ops
//! (`grad_graph.rs`), then one backward seeded at it with the vectors:
//! what `backward` of `Σᵢ ⟨∇ₓᵢ y, vᵢ⟩` computes, without recording that
//! sum, and without computing the gradient's own value where nothing
//! reads it (its last products, which a compiler's dead-code elimination
//! drops too).

use std::panic::Location;

use crate::error::{ErrorKind, GradError};
use crate::finite::{describe, first_non_finite};
use crate::ops::sink::GradSink;
use crate::tape::NodeId;
use crate::{Float, Tape, Var};

const OP: &str = "Tape::hvp";

impl<T: Float> Tape<T> {
    /// The Hessian of the one-element `y` in `xs` times the vectors `vs`
    /// (one per input, of its shape), added into the gradient slots as
    /// [`backward`](Tape::backward) adds: after it, [`grad`](Tape::grad)
    /// of a parameter `xᵢ` reads `Σⱼ ∂²y/∂xᵢ∂xⱼ vⱼ` (plus what its slot
    /// held), and every other parameter's slot gets its mixed derivative
    /// `∂/∂w Σⱼ ⟨∂y/∂xⱼ, vⱼ⟩` the same way. PyTorch's
    /// `torch.autograd.functional.hvp`, JAX's `jvp(grad(f))`.
    ///
    /// The same gradients, bit for bit, as recording the gradient with
    /// [`grad_graph`](Tape::grad_graph) and calling `backward` on
    /// `Σⱼ sum(gⱼ * vⱼ)`; faster, because the gradient's value is not all
    /// needed: the products that would compute the gradients themselves
    /// are recorded but never run (a Hessian-vector product of an MLP
    /// skips one of its four large products). The nodes it records are
    /// dropped before it returns, so the tape holds what it held before.
    ///
    /// Errors, with no slot touched: a bad handle, `xs` and `vs` of
    /// different lengths ([`ErrorKind::IndexCount`]) or a `vᵢ` of another
    /// shape than its `xᵢ` ([`ErrorKind::ShapeMismatch`]), and whatever
    /// [`grad_graph`](Tape::grad_graph) refuses. In anomaly mode a
    /// non-finite `vᵢ` is refused as `backward_with` refuses its seed.
    ///
    /// ```
    /// use grad_runtime::{grad, ndarray::array, Tape};
    ///
    /// let mut tape = Tape::<f64>::new();
    /// let x = tape.param(array![1.0, 2.0]);
    /// let y = grad!(tape; sum(x * x * x));   // Σ x³: H = diag(6x)
    /// let v = tape.constant(array![1.0, -1.0]);
    /// tape.hvp(y, &[x], &[v])?;
    /// assert_eq!(tape.grad(x), array![6.0, -12.0].into_dyn());
    /// # Ok::<(), grad_runtime::GradError>(())
    /// ```
    #[track_caller]
    pub fn hvp(&mut self, y: Var, xs: &[Var], vs: &[Var]) -> Result<(), GradError> {
        let location = Location::caller();
        if let Some(error) = self.error() {
            return Err(error.clone());
        }
        self.refuse_in_inference(OP, location)?;
        if xs.len() != vs.len() {
            let kind = ErrorKind::IndexCount { what: "vector", got: vs.len(), expected: xs.len() };
            return Err(GradError::new(OP, kind, Vec::new(), location));
        }
        for (&x, &v) in xs.iter().zip(vs) {
            let (x, v) = (self.check_or_error(OP, x, location)?, self.check_or_error(OP, v, location)?);
            if self.shape(x) != self.shape(v) {
                let shapes = vec![self.shape(x).to_vec(), self.shape(v).to_vec()];
                return Err(GradError::new(OP, ErrorKind::ShapeMismatch, shapes, location));
            }
            if self.detect_anomaly()
                && let Some((position, bad)) = first_non_finite(&self.value_of(v).data)
            {
                let kind = ErrorKind::NonFinite { value: describe(bad), position, input: None };
                return Err(GradError::new(OP, kind, vec![self.shape(v).to_vec()], location));
            }
        }
        let start = self.nodes.len();
        let mut seeds = std::mem::take(&mut self.graph_scratch.seeds);
        seeds.clear();
        let recorded = self.record_gradients(y, xs, true, location, |k, g| seeds.push((g.index(), vs[k].index())));
        // The products the walk left uncomputed: nothing read them.
        let mut unread = std::mem::take(&mut self.graph_scratch.deferred);
        let result = recorded.and_then(|()| self.backward_from(&seeds, &mut unread));
        self.graph_scratch.seeds = seeds;
        self.graph_scratch.deferred = unread;
        self.truncate_nodes(start);
        self.clear_grads_from(start);
        result
    }

    /// Backward from each `(node, v)` of `seeds` at once, `v`'s value the
    /// node's gradient: the walk of [`backward`](Tape::backward) seeded at
    /// several nodes. The handles were checked.
    ///
    /// A seed at an `unread` product, once in `seeds`, is that product's
    /// whole gradient (no node read the product, so none adds to its
    /// gradient): its rule reads `v` where it lies, at its turn in the
    /// walk, instead of a copy in a slot. Other seeds are copied into
    /// their slots.
    fn backward_from(&mut self, seeds: &[(NodeId, NodeId)], unread: &mut [NodeId]) -> Result<(), GradError> {
        unread.sort_unstable_by(|a, b| b.cmp(a));
        let unread = &*unread;
        // The vector of a seed whose rule reads it in place: the one seed at an unread product.
        let in_place = |node: NodeId| {
            let mut at_node = seeds.iter().filter(|s| s.0 == node);
            match (at_node.next(), at_node.next()) {
                (Some(&(_, v)), None) if unread.contains(&node) => Some(v),
                _ => None,
            }
        };
        self.fit_grads();
        self.clear_intermediate_grads();
        let mut sink = GradSink::new(&self.nodes, &mut self.grads, &mut self.pool);
        for &(node, v) in seeds.iter().filter(|s| in_place(s.0).is_none()) {
            let value = &self.nodes[v].value.data;
            let mut seed = sink.scratch_for(node, value.len());
            seed.copy_from_slice(value);
            sink.add(node, seed);
        }
        let Some(mut top) = seeds.iter().map(|&(node, _)| node).max() else { return Ok(()) };
        for (node, v) in unread.iter().filter_map(|&node| Some((node, in_place(node)?))) {
            self.walk(top, node + 1)?;
            self.rule_with(node, v);
            let Some(below) = node.checked_sub(1) else { return Ok(()) };
            top = below;
        }
        self.walk(top, 0)
    }
}

#[cfg(test)]
mod tests {
    use ndarray::{Array2, array};

    use crate::{Tape, g_add, g_matmul, g_mse, g_tanh};

    #[test]
    fn the_gradients_own_products_are_never_computed() {
        // mse(tanh(x @ w1 + b1) @ w2, t): the gradients of w1 and w2 end in
        // products (xᵀ dz1, hᵀ dz2) that only the seeded backward reads;
        // dh = dz2 w2ᵀ is read by the walk, so it is computed.
        let mut tp = Tape::<f64>::new();
        let w1 = tp.param(Array2::from_shape_fn((3, 4), |(i, j)| (i + 2 * j) as f64 / 7.0 - 0.5));
        let b1 = tp.param(array![0.1, -0.2, 0.3, 0.0]);
        let w2 = tp.param(Array2::from_shape_fn((4, 2), |(i, j)| (2 * i + j) as f64 / 9.0 - 0.4));
        let x = tp.constant(Array2::from_shape_fn((5, 3), |(i, j)| (i * 3 + j) as f64 / 10.0 - 0.7));
        let t = tp.constant(Array2::from_shape_fn((5, 2), |(i, j)| (i + j) as f64 / 4.0));
        let z = g_matmul(&mut tp, x, w1);
        let z = g_add(&mut tp, z, b1);
        let h = g_tanh(&mut tp, z);
        let y = g_matmul(&mut tp, h, w2);
        let loss = g_mse(&mut tp, y, t);
        let vs = [w1, b1, w2].map(|p| {
            let shape = tp.shape(p.index()).to_vec();
            tp.constant(ndarray::ArrayD::from_elem(shape, 0.5))
        });
        tp.hvp(loss, &[w1, b1, w2], &vs).unwrap();
        assert_eq!(tp.graph_scratch.deferred.len(), 2, "w1's and w2's gradient products");
        tp.grad_graph(loss, &[w1, b1, w2]).unwrap();
        assert!(tp.graph_scratch.deferred.is_empty(), "grad_graph computes every value");
        tp.set_detect_anomaly(true);
        tp.hvp(loss, &[w1, b1, w2], &vs).unwrap();
        assert!(tp.graph_scratch.deferred.is_empty(), "anomaly mode checks every value");
    }
}
