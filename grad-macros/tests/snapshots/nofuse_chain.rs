// grad!(#[nofuse] tape; tanh(x * 0.9 + 0.1))

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        let __t0 = ::grad_runtime::dsl::mul(
            __tape,
            x,
            ::grad_runtime::dsl::Operand::Scalar(
                ::grad_runtime::dsl::lit(0.9f32, 0.9f64),
            ),
        );
        let __t1 = ::grad_runtime::g_adds(
            __tape,
            __t0,
            ::grad_runtime::dsl::lit(0.1f32, 0.1f64),
        );
        ::grad_runtime::g_tanh(__tape, __t1)
    }
}
