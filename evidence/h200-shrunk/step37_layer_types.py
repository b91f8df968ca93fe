"""Step-3.7-Flash with MTP: does the real checkpoint reach the same IndexError as the shrunk one? On a CPU:
`python3 step37_layer_types.py` (needs transformers 5.17.0, the H200's).

The real checkpoint (`Step3p7ForConditionalGeneration`) takes its text config from transformers' `Step3p7TextConfig`,
not vLLM's `Step3p5Config` (which the shrunk backbone uses). Given the hub layout, `layer_types` padded with one entry
per MTP layer, both keep only `num_hidden_layers` entries. transformers moves the rest to `mtp_layer_types`, which
vLLM 0.26.0 never reads. vLLM's MTP layers are `Step3p5DecoderLayer`s at indices `num_hidden_layers..`
(vllm/model_executor/models/step3p5_mtp.py:84), and they index `layer_types[layer_idx]`
(vllm/model_executor/models/step3p5.py:162).
"""

import transformers
from transformers.models.step3p7.configuration_step3p7 import Step3p7TextConfig

layers, mtp = 45, 3  # Step-3.7-Flash: 45 layers, MTP-3 (SOURCE.md of suites/models/shrunk-step-3.7-flash)
padded = ["full_attention" if i % 4 == 0 else "sliding_attention" for i in range(layers + mtp)]
config = Step3p7TextConfig(num_hidden_layers=layers, num_nextn_predict_layers=mtp, layer_types=padded)
print(
    f"transformers {transformers.__version__}: layer_types {len(config.layer_types)} entries, "
    f"mtp_layer_types {len(config.mtp_layer_types or [])}"
)
try:
    config.layer_types[layers]
    print(f"layer_types[{layers}] exists: the first MTP layer builds")
except IndexError as exc:
    print(f"layer_types[{layers}] (the first MTP layer, step3p5.py:162): IndexError: {exc}")
