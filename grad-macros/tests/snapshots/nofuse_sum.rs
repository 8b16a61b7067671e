// grad!(#[nofuse] tape; sum(sigmoid(x) * x))

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        let __t0 = ::grad_runtime::g_sigmoid(__tape, x);
        let __t1 = ::grad_runtime::dsl::mul(__tape, __t0, x);
        ::grad_runtime::g_sum(__tape, __t1)
    }
}
