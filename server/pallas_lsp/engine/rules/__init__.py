"""One rule per module. Each exposes CODE and check(ctx) -> Iterable[Finding].

The registry is explicit (not discovered) so that a rule's presence is
visible in one place and import order is fixed.
"""
from pallas_lsp.engine.rules import (pal101_dma_arg_not_ref, pal102_send_sem_not_ref,
                                     pal103_dst_sem_not_scalar, pal104_send_sem_not_scalar,
                                     pal105_src_sem_device_id, pal106_wait_send_local,
                                     pal108_negative_priority, pal109_dma_regular_sem,
                                     pal110_wait_sem_not_ref, pal111_dma_add,
                                     pal112_wait_on_value,
                                     pal201_sem_op_not_ref, pal202_sem_op_not_scalar,
                                     pal203_sem_op_wrong_type, pal204_direct_hbm_access,
                                     pal205_store_ref_into_ref, pal206_load_store_on_value,
                                     pal207_non_decrementing_wait, pal208_run_scoped_hbm,
                                     pal209_roll_arguments, pal301_unused_descriptor, pal302_dma_never_waited,
                                     pal303_wait_without_start, pal304_dma_regular_sem_start,
                                     pal305_dma_shape_mismatch, pal306_dma_window_out_of_bounds,
                                     pal401_block_shape_not_tiled,
                                     pal402_no_tpu_lowering, pal403_int8_vector_arithmetic,
                                     pal404_scoped_vmem, pal405_float16_vector,
                                     pal406_wait_sem_array, pal407_buffered_count,
                                     syntax_floor)

RULES = (
    pal101_dma_arg_not_ref, pal102_send_sem_not_ref, pal103_dst_sem_not_scalar,
    pal104_send_sem_not_scalar, pal105_src_sem_device_id, pal106_wait_send_local,
    pal108_negative_priority, pal109_dma_regular_sem, pal110_wait_sem_not_ref,
    pal111_dma_add, pal112_wait_on_value, pal201_sem_op_not_ref, pal202_sem_op_not_scalar,
    pal203_sem_op_wrong_type, pal204_direct_hbm_access, pal205_store_ref_into_ref,
    pal206_load_store_on_value, pal207_non_decrementing_wait, pal208_run_scoped_hbm,
    pal209_roll_arguments, pal301_unused_descriptor, pal302_dma_never_waited, pal303_wait_without_start,
    pal304_dma_regular_sem_start, pal305_dma_shape_mismatch, pal306_dma_window_out_of_bounds,
    pal401_block_shape_not_tiled, pal402_no_tpu_lowering, pal403_int8_vector_arithmetic,
    pal404_scoped_vmem, pal405_float16_vector, pal406_wait_sem_array, pal407_buffered_count,
)

# Run after RULES on the file's own AST: what the source alone decides
# (rules/syntax_floor.py); `analyze` keeps a finding of theirs only where no
# rule reported at that span.
FLOOR = (syntax_floor,)

# Codes with a catalog entry but no static rule: JAX raises them in cases the
# source alone cannot decide (PAL107 needs the runtime type of an operand).
CATALOG_ONLY = ("PAL107",)

CODES = tuple(r.CODE for r in RULES)
