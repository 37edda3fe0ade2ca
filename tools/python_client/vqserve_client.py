#!/usr/bin/python3
"""example python client of vqserve (debian's python3-grpcio; stubs from scripts/gen_python_stubs).

  /usr/bin/python3 tools/python_client/vqserve_client.py --target 127.0.0.1:50051 \
      --prompt "Tell me about the sea." --max-tokens 64 --codec fp16
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gen"))

import grpc  # noqa: E402

import health_pb2  # noqa: E402
import health_pb2_grpc  # noqa: E402
import vqserve_pb2  # noqa: E402
import vqserve_pb2_grpc  # noqa: E402


def make_channel(target, tls_ca=None):
    if tls_ca:
        with open(tls_ca, "rb") as f:
            return grpc.secure_channel(target, grpc.ssl_channel_credentials(root_certificates=f.read()))
    return grpc.insecure_channel(target)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="127.0.0.1:50051")
    ap.add_argument("--tls-ca")
    ap.add_argument("--api-key")
    ap.add_argument("--prompt", default="What is the capital of France?")
    ap.add_argument("--chat", action="store_true", help="send the prompt as a user chat message")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--top-p", type=float)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--codec", default="")
    ap.add_argument("--stop", action="append", default=[])
    args = ap.parse_args()

    channel = make_channel(args.target, args.tls_ca)
    metadata = [("authorization", "Bearer " + args.api_key)] if args.api_key else []

    health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
    print("health:", health_pb2.HealthCheckResponse.ServingStatus.Name(health.status), file=sys.stderr)

    stub = vqserve_pb2_grpc.InferenceStub(channel)
    info = stub.GetModelInfo(vqserve_pb2.GetModelInfoRequest(), metadata=metadata, timeout=10)
    print("model: %s, codecs: %s" % (info.model_name, ", ".join(c.name for c in info.codecs)), file=sys.stderr)

    # request text fields are proto bytes (the server checks their utf-8): encode str.
    req = vqserve_pb2.GenerateRequest(max_tokens=args.max_tokens, temperature=args.temperature,
                                      kv_codec=args.codec.encode(),
                                      stop=[s.encode() for s in args.stop])
    if args.chat:
        req.chat.messages.add(role=b"user", content=args.prompt.encode())
    else:
        req.text = args.prompt.encode()
    if args.top_p is not None:
        req.top_p = args.top_p
    if args.seed is not None:
        req.seed = args.seed
    last = None
    for msg in stub.Generate(req, metadata=metadata, timeout=600):
        sys.stdout.write(msg.text)
        sys.stdout.flush()
        if msg.finish_reason:
            last = msg
    print()
    if last is not None:
        u = last.usage
        print("finish=%s prompt=%d completion=%d codec=%s kv_bytes=%d compression=%.2fx" % (
            vqserve_pb2.FinishReason.Name(last.finish_reason), u.prompt_tokens, u.completion_tokens,
            u.kv_codec, u.kv_bytes, u.kv_compression_ratio), file=sys.stderr)


if __name__ == "__main__":
    main()
