// grad!(tape; sum(sigmoid(x) * x))

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        static __GRAD_REGION_0: ::grad_runtime::dsl::Plan = ::grad_runtime::dsl::Plan::new(
            "fused sum(sigmoid(x) * x)",
            {
                use ::grad_runtime::dsl::step::*;
                &[sigmoid(leaf(0)), mul(step(0), leaf(0)), sum(step(1))]
            },
            &[
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
            ],
            1,
            0,
        );
        ::grad_runtime::dsl::fused(
            __tape,
            const {
                &::grad_runtime::dsl::Region::new(
                    &__GRAD_REGION_0,
                    ::core::option::Option::None,
                )
            },
            [::grad_runtime::dsl::Operand::Var(x)],
            [],
        )
    }
}
