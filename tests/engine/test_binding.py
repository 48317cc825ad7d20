"""Kernel discovery and parameter binding, checked through what the engine
infers for each name (the same data hover and inlay hints show)."""
from conftest import codes, run


def _kinds(analysis):
    return {n.name: n.value.describe() for n in analysis.names if n.is_param}


def test_pallas_call_binds_inputs_outputs_and_scratch():
    a, _ = run("""
        def kernel(x_ref, o_hbm, buf, sem, sems):
            pass

        def f(x):
            return pl.pallas_call(
                kernel,
                out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32),
                in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                out_specs=pl.BlockSpec(memory_space=pl.ANY),
                scratch_shapes=[pltpu.VMEM((8, 128), jnp.bfloat16), pltpu.SemaphoreType.DMA,
                                pltpu.SemaphoreType.DMA((2,))],
                grid=(2,),
            )(x)
    """)
    k = _kinds(a)
    assert k["x_ref"] == "Ref · VMEM · ?[8, 128]"
    assert k["o_hbm"] == "Ref · ANY · f32[16, 128]"
    assert k["buf"] == "Ref · VMEM · bf16[8, 128]"
    assert k["sem"] == "DMA semaphore · shape ()"
    assert k["sems"] == "DMA semaphore · shape (2,)"
    assert a.kernels == ["kernel"]


def test_prefetch_grid_spec_and_squeezed_block_dims():
    a, _ = run("""
        def kernel(idx_ref, x_ref, o_ref, acc):
            pass

        def f(idx, x):
            return pl.pallas_call(
                kernel,
                out_shape=jax.ShapeDtypeStruct((4, 8, 128), jnp.float32),
                grid_spec=pltpu.PrefetchScalarGridSpec(
                    num_scalar_prefetch=1,
                    grid=(4,),
                    in_specs=[pl.BlockSpec((None, 8, 128), lambda i, idx: (idx[i], 0, 0))],
                    out_specs=pl.BlockSpec((pl.Squeezed(), 8, 128), lambda i, idx: (i, 0, 0)),
                    scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)],
                ),
            )(idx, x)
    """)
    k = _kinds(a)
    assert k["idx_ref"] == "Ref · SMEM"
    assert k["x_ref"] == "Ref · VMEM · ?[8, 128]"
    assert k["o_ref"] == "Ref · VMEM · f32[8, 128]"
    assert k["acc"] == "Ref · VMEM · f32[8, 128]"


def test_dict_scratch_becomes_keyword_arguments():
    a, _ = run("""
        def kernel(x_ref, o_ref, *, buf, sem):
            pass

        out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                             in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                             out_specs=pl.BlockSpec(memory_space=pl.ANY),
                             scratch_shapes=dict(buf=pltpu.VMEM((8, 128), jnp.float32),
                                                 sem=pltpu.SemaphoreType.DMA))
    """)
    k = _kinds(a)
    assert k["sem"] == "DMA semaphore · shape ()"
    assert k["buf"].startswith("Ref · VMEM")


def test_partial_kernel_and_tuple_scratch_items():
    # all_gather's pattern: each scratch item is a tuple of semaphores, so
    # `recv_sem[0]` indexes a Python tuple and stays a Ref (no PAL101).
    a, src = run("""
        def ag_kernel(x_ref, o_ref, send_sem, recv_sem, *, axis_name):
            pltpu.async_copy(x_ref, o_ref.at[0], recv_sem[0]).wait()

        def f(x):
            return pl.pallas_call(
                functools.partial(ag_kernel, axis_name="x"),
                out_shape=jax.ShapeDtypeStruct((2, 8, 128), jnp.float32),
                grid_spec=pltpu.PrefetchScalarGridSpec(
                    num_scalar_prefetch=0,
                    scratch_shapes=((pltpu.SemaphoreType.DMA, pltpu.SemaphoreType.DMA),
                                    (pltpu.SemaphoreType.DMA, pltpu.SemaphoreType.DMA)),
                    in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                    out_specs=pl.BlockSpec(memory_space=pl.ANY),
                ),
            )(x)
    """)
    assert a.findings == []
    k = _kinds(a)
    assert k["recv_sem"].startswith("(DMA semaphore · shape ()")


def test_pallas_call_used_as_decorator_through_partial():
    assert codes("""
        @functools.partial(
            pl.pallas_call,
            out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec(memory_space=pl.ANY),
            scratch_shapes=[pltpu.SemaphoreType.DMA((2,))],
        )
        def kernel(x_hbm, o_hbm, sems):
            pltpu.make_async_copy(x_hbm, o_hbm, sems).start()
            pltpu.make_async_copy(x_hbm, o_hbm, sems.at[0]).wait()
    """) == ["PAL103"]


def test_run_scoped_and_helper_functions_get_values():
    a, src = run("""
        def copy_in(src, dst, sem):
            c = pltpu.make_async_copy(src, dst, sem)
            c.start()
            c.wait()

        def kernel(x_hbm, o_hbm):
            def body(buf, sems):
                copy_in(x_hbm, buf, sems)
            pl.run_scoped(body, pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA((2,)))

        pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                       in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                       out_specs=pl.BlockSpec(memory_space=pl.ANY))
    """)
    assert [f.code for f in a.findings] == ["PAL103"]
    # The diagnostic is in the helper, on the argument that was bad in this call.
    assert "sem)" in src.split("\n")[a.findings[0].span.line]


def test_unknown_kernel_params_never_produce_findings():
    # Nobody calls this kernel: its parameters are unknown, so nothing is
    # claimed about what they are...
    assert codes("""
        def kernel(x, o, sem):
            pltpu.make_async_copy(x, o, sem).start()
    """) == []
    # ...except what their names say of semaphores: no file of the corpora
    # gives a DMA one semaphore named `sems` (tests/engine/test_sems_named.py).
    assert codes("""
        def kernel(x, o, sems):
            pltpu.make_async_copy(x, o, sems).start()
    """) == ["PAL103"]
    # ...but `x[...]` is a load whatever `x` is: the syntax floor reports what
    # JAX rejects from the text alone (issue: "never below syntax").
    assert codes("""
        def kernel(x, o, sem):
            pltpu.make_async_copy(x[...], o, sem).start()
    """) == ["PAL101"]


def test_fori_loop_and_when_bodies_are_walked():
    assert sorted(codes("""
        def kernel(x_hbm, o_hbm, buf, sems):
            def body(i, carry):
                pltpu.make_async_copy(x_hbm, buf, sems).start()
                pltpu.make_async_copy(x_hbm, buf, sems.at[0]).wait()
                return carry
            jax.lax.fori_loop(0, 4, body, 0)

            @pl.when(pl.program_id(0) == 0)
            def _():
                pltpu.make_async_copy(buf, o_hbm, sems[1]).start()
                pltpu.make_async_copy(buf, o_hbm, sems.at[1]).wait()

        pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                       in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                       out_specs=pl.BlockSpec(memory_space=pl.ANY),
                       scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                                       pltpu.SemaphoreType.DMA((2,))])
    """)) == ["PAL101", "PAL103"]


def test_list_of_refs_and_loops_over_them():
    assert codes("""
        def kernel(a_hbm, b_hbm, o_hbm, buf, sem):
            srcs = [a_hbm, b_hbm]
            for src in srcs:
                pltpu.sync_copy(src[...], buf)

        pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                       in_specs=[pl.BlockSpec(memory_space=pl.ANY)] * 2,
                       out_specs=pl.BlockSpec(memory_space=pl.ANY),
                       scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA])
    """) in (["PAL101", "PAL204"], ["PAL204", "PAL101"])


def test_at_views_narrow_semaphore_shapes():
    assert codes("""
        def kernel(x_hbm, o_hbm, sems):
            pltpu.make_async_copy(x_hbm, o_hbm, sems.at[0]).start()      # PAL103: shape (4,)
            pltpu.make_async_copy(x_hbm, o_hbm, sems.at[0, 1]).start()   # fine: ()
            pltpu.make_async_copy(x_hbm, o_hbm, sems.at[0, 1]).wait()

        pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                       in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                       out_specs=pl.BlockSpec(memory_space=pl.ANY),
                       scratch_shapes=[pltpu.SemaphoreType.DMA((2, 4))])
    """) == ["PAL103"]


def test_pl_kernel_decorator_binds_outputs_and_scratch_from_the_end():
    a, _ = run("""
        mesh = pltpu.create_tensorcore_mesh("core")

        @functools.partial(pl.kernel, out_type=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                           mesh=mesh,
                           scratch_types=[pltpu.VMEM((8, 128), jnp.float32),
                                          pltpu.SemaphoreType.DMA((2,))])
        def body(x_ref, o_ref, buf, sems):
            c = pltpu.make_async_copy(x_ref, buf, sems)
            c.start()
            pltpu.make_async_copy(x_ref, buf, sems.at[0]).wait()
    """)
    k = _kinds(a)
    assert k["o_ref"] == "Ref · f32[8, 128]"
    assert k["sems"] == "DMA semaphore · shape (2,)"
    assert [f.code for f in a.findings] == ["PAL103"]


def test_core_map_scratch_shapes_are_the_body_parameters():
    a, _ = run("""
        def run(x_hbm_ref):
            @pl.core_map(pltpu.create_tensorcore_mesh("core"),
                         scratch_shapes=dict(sem=pltpu.SemaphoreType.REGULAR((2,))))
            def _(*, sem):
                pl.semaphore_signal(sem, 1)
    """)
    assert [f.code for f in a.findings] == ["PAL202"]
    assert _kinds(a)["sem"] == "regular semaphore · shape (2,)"


def test_emit_pipeline_body_gets_vmem_blocks():
    a, _ = run("""
        def kernel(x_hbm, o_hbm):
            def inner(x_blk, o_blk):
                o_blk[...] = x_blk
            pltpu.emit_pipeline(inner, grid=(4,),
                                in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                                out_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))])(x_hbm, o_hbm)

        pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32),
                       in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                       out_specs=pl.BlockSpec(memory_space=pl.ANY))
    """)
    assert _kinds(a)["x_blk"] == "Ref · VMEM · ?[8, 128]"
    assert [f.code for f in a.findings] == ["PAL205"]


def test_scalar_prefetch_value_used_as_index_is_fine():
    assert codes("""
        def kernel(idx_ref, x_hbm, o_hbm, buf, sem):
            c = pltpu.make_async_copy(x_hbm.at[idx_ref[0]], buf, sem)
            c.start()
            c.wait()
            o_hbm[...] = buf[...]

        pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                       grid_spec=pltpu.PrefetchScalarGridSpec(
                           num_scalar_prefetch=1, grid=(1,),
                           in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                           out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
                           scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                                           pltpu.SemaphoreType.DMA]))
    """) == []


def test_kernel_chosen_by_a_flag_is_checked_in_each_variant():
    # paged_attention's pattern: `kernel = a if flag else b`, then partial.
    assert codes("""
        def kernel_a(x_hbm, o_hbm, sems):
            c = pltpu.make_async_copy(x_hbm, o_hbm, sems)
            c.start()
            c.wait()

        def kernel_b(x_hbm, o_hbm, sems):
            c = pltpu.make_async_copy(x_hbm, o_hbm, sems.at[0])
            c.start()
            c.wait()

        def wrapper(x, fast, scale):
            if fast:
                kernel = kernel_a
            else:
                kernel = kernel_b
            return pl.pallas_call(
                functools.partial(kernel),
                out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                out_specs=pl.BlockSpec(memory_space=pl.ANY),
                scratch_shapes=[pltpu.SemaphoreType.DMA((2,))])(x)
    """) == ["PAL103"]


def test_kernel_inside_a_jitted_closure_is_found():
    assert codes("""
        def outer(x, n):
            scratch = [pltpu.SemaphoreType.DMA((2,))]

            @jax.jit
            def call(x):
                return pl.pallas_call(
                    functools.partial(kernel, n=n),
                    out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                    in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                    out_specs=pl.BlockSpec(memory_space=pl.ANY),
                    scratch_shapes=scratch)(x)

            return jax.shard_map(call, mesh=None, in_specs=None, out_specs=None)(x)

        def kernel(x_hbm, o_hbm, sems, *, n, debug=False):
            c = pltpu.make_async_copy(x_hbm, o_hbm, sems)
            c.start()
            c.wait()
    """) == ["PAL103"]


def test_lambda_kernel_forwards_refs_to_the_real_kernel():
    assert codes("""
        def kernel(x_hbm, o_hbm, sems, factor):
            c = pltpu.make_async_copy(x_hbm, o_hbm, sems)
            c.start()
            c.wait()

        k = lambda x_hbm, o_hbm, sems: kernel(x_hbm, o_hbm, sems, 2)
        pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                       in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                       out_specs=pl.BlockSpec(memory_space=pl.ANY),
                       scratch_shapes=[pltpu.SemaphoreType.DMA((2,))])
    """) == ["PAL103"]


def test_descriptors_kept_in_instances_of_local_classes():
    # A dataclass wrapper (as in tpu-inference's causal_conv1d) and a plain
    # class holding descriptors (as in jax's paged_attention): the engine
    # follows the fields into the methods.
    assert codes("""
        import dataclasses

        @dataclasses.dataclass(frozen=True)
        class Buffer:
            hbm_ref: object
            vmem_ref: object

            def copy_in(self, slot, sem):
                pltpu.make_async_copy(self.hbm_ref[0], self.vmem_ref.at[slot], sem).start()

            def wait_in(self, slot, sem):
                pltpu.make_async_copy(self.hbm_ref.at[0], self.vmem_ref.at[slot], sem).wait()

        class Copies:
            def __init__(self, src, dst, sems):
                self._copies = []
                for i in range(2):
                    self._copies.append(pltpu.make_async_copy(src.at[i], dst.at[i], sems.at[i]))

            def start(self):
                for c in self._copies:
                    c.start()

            def wait(self):
                for c in self._copies:
                    c.wait()

        def kernel(x_hbm, o_hbm, buf, sems):
            b = Buffer(hbm_ref=x_hbm, vmem_ref=buf)
            b.copy_in(0, sems.at[0])
            b.wait_in(0, sems.at[0])
            copies = Copies(x_hbm, buf, sems)
            copies.start()
            copies.wait()

        pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((2, 8, 128), jnp.float32),
                       in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                       out_specs=pl.BlockSpec(memory_space=pl.ANY),
                       scratch_shapes=[pltpu.VMEM((2, 8, 128), jnp.float32),
                                       pltpu.SemaphoreType.DMA((2,))])
    """) == ["PAL101", "PAL204"]
