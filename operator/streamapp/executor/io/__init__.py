"""What a task reads and writes outside its state: sources (the file log, Kafka), sinks (files, Kafka
transactions), the publisher that finishes a committed batch's output, the input generator and the
`streamapp read` tool. Uses `executor.state` for manifests and staging; nothing here holds state.
"""
