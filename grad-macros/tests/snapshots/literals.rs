// grad!(tape; (2.0 * x + 1, x - 0.5, 1.0 - x, 2.0 / x, x / 2, -3.0 * x, x * 1e-3f32))

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        struct __Region0;
        impl<T: ::grad_runtime::Float> ::grad_runtime::dsl::Kernel<T, 1, 0>
        for __Region0 {
            const NAME: &'static str = "fused 2.0 * x + 1";
            const STEPS: &'static [::grad_runtime::dsl::Step] = {
                use ::grad_runtime::dsl::step::*;
                &[mul(constant(0), leaf(0)), add(step(0), constant(1))]
            };
            const SITES: &'static [&'static ::core::panic::Location<'static>] = &[
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
            ];
            fn constant(k: usize) -> T {
                match k {
                    0 => ::grad_runtime::dsl::lit(2.0f32, 2.0f64),
                    1 => ::grad_runtime::dsl::lit(1.0f32, 1.0f64),
                    _ => ::grad_runtime::dsl::lit(<f32>::NAN, <f64>::NAN),
                }
            }
            #[inline(always)]
            fn forward([x0]: [T; 1], []: [T; 0]) -> T {
                let c0: T = ::grad_runtime::dsl::lit(2.0f32, 2.0f64);
                let c1: T = ::grad_runtime::dsl::lit(1.0f32, 1.0f64);
                let v0 = c0 * x0;
                v0 + c1
            }
            #[inline(always)]
            fn backward([_]: [T; 1], _: T, g: T, []: [T; 0]) -> [T; 1] {
                let c0: T = ::grad_runtime::dsl::lit(2.0f32, 2.0f64);
                let g0 = g;
                let d0 = g0 * c0;
                [d0]
            }
        }
        let __t0 = ::grad_runtime::dsl::fused(
            __tape,
            __Region0,
            [::grad_runtime::dsl::IntoOperand::into_operand(x)],
            [],
        );
        let __t1 = ::grad_runtime::dsl::sub(
            __tape,
            x,
            ::grad_runtime::dsl::Operand::Scalar(
                ::grad_runtime::dsl::lit(0.5f32, 0.5f64),
            ),
        );
        let __t2 = ::grad_runtime::dsl::sub(
            __tape,
            ::grad_runtime::dsl::Operand::Scalar(
                ::grad_runtime::dsl::lit(1.0f32, 1.0f64),
            ),
            x,
        );
        let __t3 = ::grad_runtime::dsl::div(
            __tape,
            ::grad_runtime::dsl::Operand::Scalar(
                ::grad_runtime::dsl::lit(2.0f32, 2.0f64),
            ),
            x,
        );
        let __t4 = ::grad_runtime::dsl::div(
            __tape,
            x,
            ::grad_runtime::dsl::Operand::Scalar(
                ::grad_runtime::dsl::lit(2.0f32, 2.0f64),
            ),
        );
        let __t5 = ::grad_runtime::dsl::mul(
            __tape,
            ::grad_runtime::dsl::Operand::Scalar(
                ::grad_runtime::dsl::lit(-3.0f32, -3.0f64),
            ),
            x,
        );
        (
            __t0,
            __t1,
            __t2,
            __t3,
            __t4,
            __t5,
            ::grad_runtime::dsl::mul(
                __tape,
                x,
                ::grad_runtime::dsl::Operand::Scalar(1e-3f32),
            ),
        )
    }
}
