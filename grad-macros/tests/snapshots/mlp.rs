// grad!(tape; let y = relu(x @ w + b); mse(y, t))

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        let __t0 = ::grad_runtime::g_matmul(__tape, x, w);
        static __GRAD_REGION_0: ::grad_runtime::dsl::Plan = ::grad_runtime::dsl::Plan::new(
            "fused relu(x @ w + b)",
            {
                use ::grad_runtime::dsl::step::*;
                &[add(leaf(0), leaf(1)), relu(step(0))]
            },
            &[::grad_runtime::dsl::here(), ::grad_runtime::dsl::here()],
            2,
            0,
        );
        let y = ::grad_runtime::dsl::fused(
            __tape,
            &__GRAD_REGION_0,
            [
                ::grad_runtime::dsl::Operand::Var(__t0),
                ::grad_runtime::dsl::IntoOperand::into_operand(b),
            ],
            [],
        );
        ::grad_runtime::g_mse(__tape, y, t)
    }
}
