// grad!(#[nofuse] tape; let y = relu(x @ w + b); mse(y, t))

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        let __t0 = ::grad_runtime::g_matmul(__tape, x, w);
        let __t1 = ::grad_runtime::dsl::add(__tape, __t0, b);
        let y = ::grad_runtime::g_relu(__tape, __t1);
        ::grad_runtime::g_mse(__tape, y, t)
    }
}
