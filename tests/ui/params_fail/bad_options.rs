use grad_runtime::{Params, Var};

#[derive(Params)]
#[params(skip)]
struct OnTheStruct {
    w: Var,
}

#[derive(Params)]
struct Options {
    #[params(skp)]
    a: Var,
    #[params(rename = "out.w")]
    b: Var,
    #[params]
    c: Var,
    #[params(rename = weight)]
    d: Var,
    #[params(skip, buffer)]
    e: Var,
}

fn main() {}
