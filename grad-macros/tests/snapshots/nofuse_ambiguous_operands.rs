// grad!(#[nofuse] tape; lr * x + bias - cfg.shift / 2.0)

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        let __t0 = ::grad_runtime::dsl::mul(__tape, lr, x);
        let __t1 = ::grad_runtime::dsl::add(__tape, __t0, bias);
        let __t2 = ::grad_runtime::dsl::div(
            __tape,
            cfg.shift,
            ::grad_runtime::dsl::Operand::Scalar(
                ::grad_runtime::dsl::lit(2.0f32, 2.0f64),
            ),
        );
        ::grad_runtime::g_sub(__tape, __t1, __t2)
    }
}
