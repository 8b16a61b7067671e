// grad!(tape; let s = 0.5 * 2.0; let h = -s + x; (h, sum(h)))

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        let s = ::grad_runtime::dsl::smul(
            ::grad_runtime::dsl::lit(0.5f32, 0.5f64),
            ::grad_runtime::dsl::lit(2.0f32, 2.0f64),
        );
        let h = ::grad_runtime::dsl::add(
            __tape,
            ::grad_runtime::dsl::Operand::Scalar(::grad_runtime::dsl::sneg(s)),
            x,
        );
        (h, ::grad_runtime::g_sum(__tape, h))
    }
}
