"""vLLM support for the GPU suites: a row's engine configuration, presence checks for the imported
changes, and in-process probes (graph replays, draft loops, attention outputs, indexer scoring).

Imported inside the images and on bare GPU hosts; never imports ci/. vLLM itself is imported lazily
(it takes 20 s or more), after the row's environment has been set.
"""
