use grad_runtime::{Params, Var};

#[derive(Params)]
enum Head {
    Linear(Var),
    Bilinear(Var, Var),
}

#[derive(Params)]
union Raw {
    bits: u32,
}

fn main() {}
