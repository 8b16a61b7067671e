// grad!(#[nofuse] tape; a + b * c @ d - -e / f - g)

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        let __t0 = ::grad_runtime::dsl::mul(__tape, b, c);
        let __t1 = ::grad_runtime::g_matmul(__tape, __t0, d);
        let __t2 = ::grad_runtime::dsl::add(__tape, a, __t1);
        let __t3 = ::grad_runtime::dsl::neg(__tape, e);
        let __t4 = ::grad_runtime::dsl::div(__tape, __t3, f);
        let __t5 = ::grad_runtime::g_sub(__tape, __t2, __t4);
        ::grad_runtime::dsl::sub(__tape, __t5, g)
    }
}
