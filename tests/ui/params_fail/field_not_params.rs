use grad_runtime::{Params, Var};

#[derive(Params)]
struct Dense {
    w: Var,
    b: Var,
    scale: f32,
}

#[derive(Params)]
struct Net {
    layers: Vec<Dense>,
    name: String,
    sizes: Vec<usize>,
}

fn main() {}
