// grad!(tp; let h = linear(x, w, b); layers::norm(h, 3))

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tp).as_tape();
        let h = linear(__tape, x, w, b);
        layers::norm(__tape, h, 3)
    }
}
